package dev.idempotency.redis;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.io.ByteArrayOutputStream;
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
  private final byte[][] fields;

  private RecordValue(RecordState state, byte[][] fields) {
    this.state = state;
    this.fields = fields;
  }

  /**
   * The value a claim writes: in progress, attempt 1, the lease ending {@code leaseMillis} after
   * creation.
   */
  static byte[] inProgress(
      String ownerToken, String fingerprint, long leaseMillis, long windowMillis, String rawKey) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(64);
    out.write('I');
    field(out, ownerToken);
    field(out, "1");
    field(out, fingerprint);
    field(out, rawKey == null ? "" : rawKey);
    field(out, Long.toString(leaseMillis));
    field(out, Long.toString(windowMillis));
    field(out, "");
    field(out, "");
    field(out, "");
    return out.toByteArray();
  }

  private static void field(ByteArrayOutputStream out, String text) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    out.writeBytes(Integer.toString(bytes.length).getBytes(StandardCharsets.US_ASCII));
    out.write(':');
    out.writeBytes(bytes);
  }

  /**
   * Parses a stored value.
   *
   * @throws KeyStoreException if it is not a record of this store
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
    byte[][] fields = new byte[FIELDS][];
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
      fields[f] = Arrays.copyOfRange(value, i + 1, i + 1 + length);
      i += 1 + length;
    }
    if (i != value.length) {
      throw malformed();
    }
    return new RecordValue(state, fields);
  }

  private static KeyStoreException malformed() {
    return new KeyStoreException(
        "Redis store found a value that is not one of its records under its key prefix", null);
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
        fields[PAYLOAD],
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
    return new String(fields[field], StandardCharsets.UTF_8);
  }

  private long number(int field) {
    try {
      return Long.parseLong(text(field));
    } catch (NumberFormatException e) {
      throw malformed();
    }
  }
}
