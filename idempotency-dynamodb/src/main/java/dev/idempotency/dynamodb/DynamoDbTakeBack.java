package dev.idempotency.dynamodb;

import static dev.idempotency.dynamodb.DynamoDbWrites.FENCE;
import static dev.idempotency.dynamodb.DynamoDbWrites.IN_PROGRESS;
import static dev.idempotency.dynamodb.Items.ATTEMPT;
import static dev.idempotency.dynamodb.Items.LEASE_UNTIL;
import static dev.idempotency.dynamodb.Items.OWNER;
import static dev.idempotency.dynamodb.Items.STATE;
import static dev.idempotency.dynamodb.Items.number;
import static dev.idempotency.dynamodb.Items.string;

import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.ReturnValue;
import software.amazon.awssdk.services.dynamodb.model.ReturnValuesOnConditionCheckFailure;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemResponse;

/**
 * The take-back of a claim nothing was sent under ({@link #takeBack}), in conditional requests of
 * {@link DynamoDbWrites}, each fenced by the claim's owner token.
 */
final class DynamoDbTakeBack {

  private final DynamoDbWrites writes;

  DynamoDbTakeBack(DynamoDbWrites writes) {
    this.writes = writes;
  }

  /**
   * Takes back a claim nothing was sent under, fenced by its owner token, as if it had lapsed:
   *
   * <ol>
   *   <li>one consistent {@code GetItem}: no item in progress under the owner token, nothing to
   *       take back ({@code false});
   *   <li>a record the claim created ({@code attempt = 1}) is deleted, on condition that it is
   *       still in progress under the token at attempt 1. If that condition fails, the record read
   *       is gone (absent, or a new first attempt under another token): deleted by this request's
   *       first attempt, whose reply was lost and which the SDK retried; it is taken back;
   *   <li>a record the claim took over ({@code attempt > 1}) keeps its attempt and window, gets a
   *       fresh owner token no caller holds (so that no late renewal, completion or release of the
   *       claim taken back passes the fence again), and its lease ends at {@code now} if it ended
   *       later. DynamoDB has no {@code min}, and a renewal under the token may move the lease
   *       either way (an older one landing late moves it back), so no condition on the lease can be
   *       relied on to hold at the next request. A lease read ending after {@code now} is cut in
   *       the same request that ends the token, on condition that it still ends after {@code now};
   *       otherwise (or if a renewal moved it back meanwhile) the token is ended on the token's
   *       condition alone, whatever the lease, and if the lease it ended under turns out to end
   *       after {@code now} (a renewal moved it forward), a last request cuts it, on condition of
   *       the fresh token, which no renewal can pass. A refused condition whose item holds the
   *       fresh token is this take-back's own write (a retry after a lost reply).
   * </ol>
   */
  boolean takeBack(String keyId, String ownerToken, Instant now) {
    Map<String, AttributeValue> item = writes.read(keyId);
    if (!heldBy(item, ownerToken)) {
      return false;
    }
    Map<String, String> names = new HashMap<>();
    names.put("#owner", OWNER);
    names.put("#state", STATE);
    names.put("#attempt", ATTEMPT);
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", string(ownerToken));
    values.put(":in_progress", string(IN_PROGRESS));
    values.put(":first", number(1));
    if (Items.attempt(item) == 1) {
      return deleteFirstAttempt(keyId, ownerToken, names, values);
    }
    long at = now.toEpochMilli();
    String ended = endedOwnerToken();
    values.put(":ended", string(ended));
    if (Items.millis(item, LEASE_UNTIL) > at) {
      Map<String, String> withLease = new HashMap<>(names);
      withLease.put("#lease_until", LEASE_UNTIL);
      Map<String, AttributeValue> withNow = new HashMap<>(values);
      withNow.put(":now", number(at));
      try {
        update(
            keyId,
            "SET #owner = :ended, #lease_until = :now",
            FENCE + " AND #attempt > :first AND #lease_until > :now",
            withLease,
            withNow,
            ReturnValue.NONE);
        return true;
      } catch (ConditionalCheckFailedException e) {
        Map<String, AttributeValue> after = writes.itemAfter(e, keyId);
        if (after != null && ended.equals(Items.text(after, OWNER))) {
          return true; // this request's own write, its reply lost and the SDK's retry refused
        }
        if (!heldBy(after, ownerToken)) {
          return false;
        }
        // a renewal moved the lease back, to end by now: end the token whatever the lease
      }
    }
    Map<String, AttributeValue> endedItem;
    try {
      endedItem =
          update(
                  keyId,
                  "SET #owner = :ended",
                  FENCE + " AND #attempt > :first",
                  names,
                  values,
                  ReturnValue.ALL_NEW)
              .attributes();
    } catch (ConditionalCheckFailedException e) {
      endedItem = writes.itemAfter(e, keyId);
      if (endedItem == null || !ended.equals(Items.text(endedItem, OWNER))) {
        return false; // completed, released or taken over meanwhile
      }
      // this request's own write, its reply lost and the SDK's retry refused
    }
    if (Items.millis(endedItem, LEASE_UNTIL) > at) {
      // a renewal moved the lease past now before the token ended; none can move it any more
      try {
        update(
            keyId,
            "SET #lease_until = :now",
            "#owner = :ended AND #lease_until > :now",
            Map.of("#owner", OWNER, "#lease_until", LEASE_UNTIL),
            Map.of(":ended", string(ended), ":now", number(at)),
            ReturnValue.NONE);
      } catch (ConditionalCheckFailedException passedOrTakenOver) {
        // its lease has passed (this request's own write among them), or a claim took it over
      }
    }
    return true;
  }

  /**
   * Deletes a first attempt, on condition that it is still in progress under the token; if the
   * condition fails, whether the record read is gone: absent, or a new first attempt under another
   * token (a record under one token never goes back to attempt 1 without being deleted), so this
   * request's first attempt deleted it and the SDK's retry was refused.
   */
  private boolean deleteFirstAttempt(
      String keyId,
      String ownerToken,
      Map<String, String> names,
      Map<String, AttributeValue> values) {
    try {
      writes.deleteItem(
          "take back",
          keyId,
          FENCE + " AND #attempt = :first",
          names,
          values,
          ReturnValuesOnConditionCheckFailure.ALL_OLD);
      return true;
    } catch (ConditionalCheckFailedException e) {
      Map<String, AttributeValue> after = writes.itemAfter(e, keyId);
      if (after == null) {
        return true;
      }
      AttributeValue attempt = after.get(ATTEMPT);
      return !ownerToken.equals(Items.text(after, OWNER))
          && attempt != null
          && "1".equals(attempt.n());
    }
  }

  /** One conditional {@code UpdateItem} of a take-back; a refused condition carries the item. */
  private UpdateItemResponse update(
      String keyId,
      String update,
      String condition,
      Map<String, String> names,
      Map<String, AttributeValue> values,
      ReturnValue returned) {
    return writes.update(
        "take back",
        keyId,
        update,
        condition,
        names,
        values,
        returned,
        ReturnValuesOnConditionCheckFailure.ALL_OLD);
  }

  /** Whether an item is in progress under an owner token. */
  private static boolean heldBy(@Nullable Map<String, AttributeValue> item, String ownerToken) {
    return item != null
        && ownerToken.equals(Items.text(item, OWNER))
        && IN_PROGRESS.equals(Items.text(item, STATE));
  }

  /** A random owner token (22 characters, as a claim's), held by no caller. */
  private static String endedOwnerToken() {
    byte[] random = new byte[16];
    java.util.concurrent.ThreadLocalRandom.current().nextBytes(random);
    return java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(random);
  }
}
