package dev.idempotency.dynamodb;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * The item layout: one item per key, its attribute names, and the conversion to and from {@link
 * StoredRecord}. Times are epoch milliseconds (numbers), except the TTL attribute, which DynamoDB
 * wants in epoch seconds. Empty strings and empty results are left out rather than stored empty.
 */
final class Items {

  static final String STATE = "state";
  static final String OWNER = "owner";
  static final String ATTEMPT = "attempt";
  static final String FINGERPRINT = "fingerprint";
  static final String RESULT = "result";
  static final String CREATED_AT = "created_at";
  static final String COMPLETED_AT = "completed_at";
  static final String LEASE_UNTIL = "lease_until";
  static final String RETAIN_UNTIL = "retain_until";
  static final String RAW_KEY = "raw_key";

  private final String partitionKey;
  private final String ttlAttribute;
  private final String keyPrefix;

  Items(String partitionKey, String ttlAttribute, String keyPrefix) {
    this.partitionKey = partitionKey;
    this.ttlAttribute = ttlAttribute;
    this.keyPrefix = keyPrefix;
  }

  String partitionKey() {
    return partitionKey;
  }

  String ttlAttribute() {
    return ttlAttribute;
  }

  /** The item's primary key for a key id. */
  Map<String, AttributeValue> key(String keyId) {
    return Map.of(partitionKey, string(keyPrefix + keyId));
  }

  /** A new in-progress item for a first claim. */
  Map<String, AttributeValue> claimed(ClaimRequest request) {
    long now = request.now().toEpochMilli();
    long lease = now + request.lease().toMillis();
    long retain = now + request.retention().toMillis();
    Map<String, AttributeValue> item = new HashMap<>(key(request.keyId()));
    item.put(STATE, string(RecordState.IN_PROGRESS.name()));
    item.put(OWNER, string(request.ownerToken()));
    item.put(ATTEMPT, number(1));
    if (!request.fingerprint().isEmpty()) {
      item.put(FINGERPRINT, string(request.fingerprint()));
    }
    item.put(CREATED_AT, number(now));
    item.put(LEASE_UNTIL, number(lease));
    item.put(RETAIN_UNTIL, number(retain));
    item.put(ttlAttribute, number(ttlSeconds(retain)));
    if (request.debugKey() != null) {
      item.put(RAW_KEY, string(request.debugKey()));
    }
    return item;
  }

  /**
   * The record an item holds.
   *
   * @throws UnreadableRecordException if the item is not one of this store's records (a state it
   *     does not know, an attribute missing or of another type): that key's error, not an outage
   */
  static StoredRecord record(Map<String, AttributeValue> item) {
    RecordState state = state(item);
    String fingerprint = optional(item, FINGERPRINT, AttributeValue::s);
    SdkBytes result = optional(item, RESULT, AttributeValue::b);
    AttributeValue completedAt = item.get(COMPLETED_AT);
    byte[] payload =
        result != null
            ? result.asByteArray()
            : state == RecordState.IN_PROGRESS ? null : new byte[0];
    return new StoredRecord(
        state,
        attempt(item),
        fingerprint == null ? "" : fingerprint,
        payload,
        Instant.ofEpochMilli(millis(item, CREATED_AT)),
        completedAt == null ? null : Instant.ofEpochMilli(millis(item, COMPLETED_AT)),
        Instant.ofEpochMilli(millis(item, LEASE_UNTIL)),
        Instant.ofEpochMilli(millis(item, RETAIN_UNTIL)));
  }

  private static RecordState state(Map<String, AttributeValue> item) {
    String state = text(item, STATE);
    if (state != null) {
      for (RecordState known : RecordState.values()) {
        if (known.name().equals(state)) {
          return known;
        }
      }
    }
    throw unreadable("its " + STATE + " is not IN_PROGRESS, COMPLETED or FAILED");
  }

  /** An attribute that may be left out, but is of its type when present. */
  private static <V> @Nullable V optional(
      Map<String, AttributeValue> item, String attribute, Function<AttributeValue, V> type) {
    AttributeValue value = item.get(attribute);
    if (value == null) {
      return null;
    }
    V typed = type.apply(value);
    if (typed == null) {
      throw unreadable("its " + attribute + " is not of the store's type");
    }
    return typed;
  }

  /**
   * An item this store cannot read. Its message names the attribute, never a value (which may be a
   * key or a result).
   */
  static UnreadableRecordException unreadable(String problem) {
    return new UnreadableRecordException(
        "DynamoDB store found an item that is not one of its records: " + problem, null);
  }

  /**
   * Whether an item is this claim's own write (its first {@code PutItem} or its takeover): in
   * progress, under this request's owner token, with the lease this request wrote. Owner tokens are
   * unique per claim, so no other request's item matches.
   */
  static boolean claimedBy(@Nullable Map<String, AttributeValue> item, ClaimRequest request) {
    return item != null
        && request.ownerToken().equals(text(item, OWNER))
        && RecordState.IN_PROGRESS.name().equals(text(item, STATE))
        && item.containsKey(LEASE_UNTIL)
        && millis(item, LEASE_UNTIL) == request.now().toEpochMilli() + request.lease().toMillis();
  }

  static int attempt(Map<String, AttributeValue> item) {
    long attempt = millis(item, ATTEMPT);
    if (attempt < 1 || attempt > Integer.MAX_VALUE) {
      throw unreadable("its " + ATTEMPT + " is not a positive number");
    }
    return (int) attempt;
  }

  /** Whether an item is absent or past its window at {@code now} (as good as absent). */
  static boolean absentAt(@Nullable Map<String, AttributeValue> item, long now) {
    return item == null || item.isEmpty() || millis(item, RETAIN_UNTIL) <= now;
  }

  /** A whole-number attribute (epoch milliseconds, or the attempt). */
  static long millis(Map<String, AttributeValue> item, String attribute) {
    AttributeValue value = item.get(attribute);
    if (value == null || value.n() == null) {
      throw unreadable("its " + attribute + " is missing or not a number");
    }
    try {
      return Long.parseLong(value.n());
    } catch (NumberFormatException notWhole) {
      throw unreadable("its " + attribute + " is not a whole number");
    }
  }

  static @Nullable String text(Map<String, AttributeValue> item, String attribute) {
    AttributeValue value = item.get(attribute);
    return value == null ? null : value.s();
  }

  /** DynamoDB's TTL in epoch seconds, rounded up so that TTL never removes an item early. */
  static long ttlSeconds(long epochMillis) {
    return Math.floorDiv(epochMillis + 999, 1000);
  }

  static AttributeValue string(String value) {
    return AttributeValue.fromS(value);
  }

  static AttributeValue number(long value) {
    return AttributeValue.fromN(Long.toString(value));
  }

  static AttributeValue bytes(byte[] value) {
    return AttributeValue.fromB(SdkBytes.fromByteArray(value));
  }
}
