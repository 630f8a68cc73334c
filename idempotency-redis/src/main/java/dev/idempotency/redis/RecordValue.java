package dev.idempotency.redis;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;

/**
 * A record as one Redis string, the layout the scripts in {@code record-functions.lua} read and
 * write: a state byte ({@code I}, {@code C} or {@code F}), then nine length-prefixed fields ({@code
 * <byte length>:<bytes>}): owner token, attempt, fingerprint, raw key, lease end (ms after
 * created), window (ms after created), created (server ms), completed (ms after created), payload.
 * An in-progress record's last three fields are empty.
 *
 * <p>An in-progress record is written by the client with a plain {@code SET NX GET PX}, so it holds
 * no absolute time: its times are derived from the key's remaining TTL by whoever reads it with the
 * server's clock. Completing a record writes absolute server times and keeps the owner token, so
 * that the owner repeating its completion (after a lost reply) is recognised. A renewal that would
 * outlast the window moves the window field and the key's expiry to the lease's end.
 */
final class RecordValue {

  private static final byte[] EMPTY = new byte[0];
  private static final int FIELDS = 9;
  private static final int OWNER = 0;
  private static final int ATTEMPT = 1;
  private static final int FINGERPRINT = 2;
  private static final int RAW_KEY = 3;
  private static final int LEASE_END = 4;
  private static final int WINDOW = 5;
  private static final int CREATED = 6;
  private static final int COMPLETED = 7;
  private static final int PAYLOAD = 8;

  private final RecordState state;

  /** The stored value, read in place: a replay copies only its payload (BENCHMARKS.md, run 25). */
  private final byte[] value;

  /** Where each field's bytes start in {@link #value}. */
  private final int[] starts;

  /** How many bytes each field has. */
  private final int[] lengths;

  private RecordValue(RecordState state, byte[] value, int[] starts, int[] lengths) {
    this.state = state;
    this.value = value;
    this.starts = starts;
    this.lengths = lengths;
  }

  /**
   * The value a claim writes: in progress, attempt 1, the lease ending {@code leaseMillis} after
   * creation.
   */
  static byte[] inProgress(
      String ownerToken, String fingerprint, long leaseMillis, long windowMillis, String rawKey) {
    byte[] owner = ownerToken.getBytes(StandardCharsets.UTF_8);
    byte[] print = fingerprint.getBytes(StandardCharsets.UTF_8);
    byte[] raw = rawKey == null ? EMPTY : rawKey.getBytes(StandardCharsets.UTF_8);
    int leaseDigits = digits(leaseMillis);
    int windowDigits = digits(windowMillis);
    // written straight into one array: every claim builds one (BENCHMARKS.md, run 17)
    byte[] out =
        new byte
            [1
                + framed(owner.length)
                + framed(1)
                + framed(print.length)
                + framed(raw.length)
                + framed(leaseDigits)
                + framed(windowDigits)
                + 3 * framed(0)];
    out[0] = 'I';
    int at = field(out, 1, owner);
    at = number(out, at, 1, 1);
    at = field(out, at, print);
    at = field(out, at, raw);
    at = number(out, at, leaseMillis, leaseDigits);
    at = number(out, at, windowMillis, windowDigits);
    for (int empty = 0; empty < 3; empty++) {
      at = field(out, at, EMPTY);
    }
    return out;
  }

  /** The bytes a field of {@code length} bytes takes: its length in digits, a colon, itself. */
  private static int framed(int length) {
    return digits(length) + 1 + length;
  }

  private static int field(byte[] out, int at, byte[] bytes) {
    at = digitsAt(out, at, bytes.length, digits(bytes.length));
    out[at++] = ':';
    System.arraycopy(bytes, 0, out, at, bytes.length);
    return at + bytes.length;
  }

  /** A field holding {@code value} (not negative) in {@code digits} decimal digits. */
  private static int number(byte[] out, int at, long value, int digits) {
    at = digitsAt(out, at, digits, digits(digits));
    out[at++] = ':';
    return digitsAt(out, at, value, digits);
  }

  private static int digitsAt(byte[] out, int at, long value, int digits) {
    long rest = value;
    for (int i = at + digits - 1; i >= at; i--) {
      out[i] = (byte) ('0' + rest % 10);
      rest /= 10;
    }
    return at + digits;
  }

  private static int digits(long value) {
    if (value < 0) {
      throw new IllegalArgumentException("a record's times are not negative: " + value);
    }
    int digits = 1;
    for (long rest = value / 10; rest > 0; rest /= 10) {
      digits++;
    }
    return digits;
  }

  /**
   * Parses a stored value.
   *
   * @throws dev.idempotency.UnreadableRecordException if it is not a record of this store
   */
  static RecordValue parse(byte[] value) {
    if (value == null || value.length == 0) {
      throw malformed();
    }
    RecordState state =
        switch (value[0]) {
          case 'I' -> RecordState.IN_PROGRESS;
          case 'C' -> RecordState.COMPLETED;
          case 'F' -> RecordState.FAILED;
          default -> throw malformed();
        };
    int[] starts = new int[FIELDS];
    int[] lengths = new int[FIELDS];
    int i = 1;
    for (int f = 0; f < FIELDS; f++) {
      int length = 0;
      int digits = 0;
      while (i < value.length && value[i] != ':') {
        int digit = value[i++] - '0';
        if (digit < 0 || digit > 9 || ++digits > 9) {
          throw malformed();
        }
        length = length * 10 + digit;
      }
      if (digits == 0 || i >= value.length || i + 1 + length > value.length) {
        throw malformed();
      }
      starts[f] = i + 1;
      lengths[f] = length;
      i += 1 + length;
    }
    if (i != value.length) {
      throw malformed();
    }
    return new RecordValue(state, value, starts, lengths);
  }

  private static KeyStoreException malformed() {
    return unreadable("a value that is not one of its records", null);
  }

  /**
   * The error of a key whose value the store cannot read: not one of its records (found here or by
   * a script), or of another Redis type.
   */
  static dev.idempotency.UnreadableRecordException unreadable(String what, Throwable cause) {
    return new dev.idempotency.UnreadableRecordException(
        "Redis store found " + what + " under its key prefix", cause);
  }

  RecordState state() {
    return state;
  }

  /** The record of a completed or failed value, whose times are absolute. */
  StoredRecord settled() {
    long created = number(CREATED);
    return new StoredRecord(
        state,
        (int) number(ATTEMPT),
        text(FINGERPRINT),
        Arrays.copyOfRange(value, starts[PAYLOAD], starts[PAYLOAD] + lengths[PAYLOAD]),
        Instant.ofEpochMilli(created),
        Instant.ofEpochMilli(created + number(COMPLETED)),
        Instant.ofEpochMilli(created + number(LEASE_END)),
        Instant.ofEpochMilli(created + number(WINDOW)));
  }

  /**
   * The record of an in-progress value, its times placed with the server's time and the key's
   * remaining TTL as the claim script read them.
   */
  StoredRecord inProgress(long serverNowMillis, long remainingMillis) {
    long created = serverNowMillis - (number(WINDOW) - remainingMillis);
    return new StoredRecord(
        state,
        (int) number(ATTEMPT),
        text(FINGERPRINT),
        null,
        Instant.ofEpochMilli(created),
        null,
        Instant.ofEpochMilli(created + number(LEASE_END)),
        Instant.ofEpochMilli(serverNowMillis + remainingMillis));
  }

  /** The owner token of the last claim. */
  String ownerToken() {
    return text(OWNER);
  }

  /** The raw key kept for debugging, empty if not kept. */
  String rawKey() {
    return text(RAW_KEY);
  }

  private String text(int field) {
    return new String(value, starts[field], lengths[field], StandardCharsets.UTF_8);
  }

  /**
   * A field's number: read off the bytes when they are up to 18 decimal digits (every value this
   * store writes), else as {@link Long#parseLong} reads the field's text.
   */
  private long number(int field) {
    int start = starts[field];
    int length = lengths[field];
    if (length > 0 && length <= 18) {
      long number = 0;
      for (int i = start; i < start + length; i++) {
        int digit = value[i] - '0';
        if (digit < 0 || digit > 9) {
          return parsedNumber(field);
        }
        number = number * 10 + digit;
      }
      return number;
    }
    return parsedNumber(field);
  }

  private long parsedNumber(int field) {
    try {
      return Long.parseLong(text(field));
    } catch (NumberFormatException e) {
      throw malformed();
    }
  }
}
