package dev.idempotency.dynamodb;

import static dev.idempotency.dynamodb.Items.ATTEMPT;
import static dev.idempotency.dynamodb.Items.COMPLETED_AT;
import static dev.idempotency.dynamodb.Items.LEASE_UNTIL;
import static dev.idempotency.dynamodb.Items.OWNER;
import static dev.idempotency.dynamodb.Items.RESULT;
import static dev.idempotency.dynamodb.Items.RETAIN_UNTIL;
import static dev.idempotency.dynamodb.Items.STATE;
import static dev.idempotency.dynamodb.Items.number;
import static dev.idempotency.dynamodb.Items.string;

import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ReturnValue;
import software.amazon.awssdk.services.dynamodb.model.ReturnValuesOnConditionCheckFailure;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemResponse;

/**
 * The writes after a claim, each one conditional request fenced by the owner token and the record's
 * window ({@code retain_until > now}, since TTL deletion lags by up to days): complete, release,
 * take-back and extend; and the operator's find and delete.
 */
final class DynamoDbWrites {

  private static final String IN_PROGRESS = RecordState.IN_PROGRESS.name();
  private static final String FENCE = "#owner = :owner AND #state = :in_progress";

  private final Requests requests;
  private final Items items;

  DynamoDbWrites(Requests requests, Items items) {
    this.requests = requests;
    this.items = items;
  }

  /** The item of a key id, read consistently; null if there is none. */
  @Nullable Map<String, AttributeValue> read(String keyId) {
    GetItemResponse response =
        requests.send(
            "read",
            () ->
                requests
                    .client()
                    .getItem(
                        get ->
                            get.tableName(requests.table())
                                .key(items.key(keyId))
                                .consistentRead(true)
                                .overrideConfiguration(requests.override())));
    return response.hasItem() && !response.item().isEmpty() ? response.item() : null;
  }

  /**
   * The item that refused a condition: the one DynamoDB returned with the failure ({@code
   * ALL_OLD}), else (dynalite returns none) read consistently; null if there is none.
   */
  @Nullable Map<String, AttributeValue> itemAfter(ConditionalCheckFailedException e, String keyId) {
    return e.hasItem() && !e.item().isEmpty() ? e.item() : read(keyId);
  }

  /**
   * Writes the outcome; if the condition fails, the item that failed it tells whether this owner
   * already wrote this very outcome (a retry whose first reply was lost).
   */
  boolean complete(CompleteRequest request) {
    long now = request.now().toEpochMilli();
    Map<String, String> names = new HashMap<>();
    names.put("#owner", OWNER);
    names.put("#state", STATE);
    names.put("#completed_at", COMPLETED_AT);
    names.put("#retain_until", RETAIN_UNTIL);
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", string(request.ownerToken()));
    values.put(":in_progress", string(IN_PROGRESS));
    values.put(":state", string(request.state().name()));
    values.put(":now", number(now));
    String update = "SET #state = :state, #completed_at = :now";
    if (request.payload().length > 0) {
      names.put("#result", RESULT);
      values.put(":result", Items.bytes(request.payload()));
      update += ", #result = :result";
    }
    try {
      update(
          "complete",
          request.keyId(),
          update,
          FENCE + " AND #retain_until > :now",
          names,
          values,
          ReturnValue.NONE,
          ReturnValuesOnConditionCheckFailure.ALL_OLD);
      return true;
    } catch (ConditionalCheckFailedException e) {
      Map<String, AttributeValue> item = itemAfter(e, request.keyId());
      if (item == null || !request.ownerToken().equals(Items.text(item, OWNER))) {
        return false;
      }
      StoredRecord record = Items.record(item);
      return record.state() == request.state()
          && record.payload() != null
          && Arrays.equals(record.payload(), request.payload());
    }
  }

  boolean release(String keyId, String ownerToken) {
    try {
      deleteItem(
          "release",
          keyId,
          FENCE,
          Map.of("#owner", OWNER, "#state", STATE),
          Map.of(":owner", string(ownerToken), ":in_progress", string(IN_PROGRESS)),
          ReturnValuesOnConditionCheckFailure.NONE);
      return true;
    } catch (ConditionalCheckFailedException e) {
      return false;
    }
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
    Map<String, AttributeValue> item = read(keyId);
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
        Map<String, AttributeValue> after = itemAfter(e, keyId);
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
      endedItem = itemAfter(e, keyId);
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
      deleteItem(
          "take back",
          keyId,
          FENCE + " AND #attempt = :first",
          names,
          values,
          ReturnValuesOnConditionCheckFailure.ALL_OLD);
      return true;
    } catch (ConditionalCheckFailedException e) {
      Map<String, AttributeValue> after = itemAfter(e, keyId);
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
    return update(
        "take back",
        keyId,
        update,
        condition,
        names,
        values,
        returned,
        ReturnValuesOnConditionCheckFailure.ALL_OLD);
  }

  /** One conditional {@code UpdateItem} of a key id, named {@code operation} in its failures. */
  private UpdateItemResponse update(
      String operation,
      String keyId,
      String update,
      String condition,
      Map<String, String> names,
      Map<String, AttributeValue> values,
      ReturnValue returned,
      ReturnValuesOnConditionCheckFailure onRefusal) {
    return requests.send(
        operation,
        () ->
            requests
                .client()
                .updateItem(
                    write ->
                        write
                            .tableName(requests.table())
                            .key(items.key(keyId))
                            .updateExpression(update)
                            .conditionExpression(condition)
                            .expressionAttributeNames(names)
                            .expressionAttributeValues(values)
                            .returnValues(returned)
                            .returnValuesOnConditionCheckFailure(onRefusal)
                            .overrideConfiguration(requests.override())));
  }

  /** One conditional {@code DeleteItem} of a key id, named {@code operation} in its failures. */
  private void deleteItem(
      String operation,
      String keyId,
      String condition,
      Map<String, String> names,
      Map<String, AttributeValue> values,
      ReturnValuesOnConditionCheckFailure onRefusal) {
    requests.send(
        operation,
        () ->
            requests
                .client()
                .deleteItem(
                    delete ->
                        delete
                            .tableName(requests.table())
                            .key(items.key(keyId))
                            .conditionExpression(condition)
                            .expressionAttributeNames(names)
                            .expressionAttributeValues(values)
                            .returnValuesOnConditionCheckFailure(onRefusal)
                            .overrideConfiguration(requests.override())));
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

  /**
   * Renews a lease, fenced by the owner token alone (not by the window on the owner's clock, which
   * may have run ahead: a renewal lost to it would let another process take over a live send): one
   * request while the new lease ends inside the window; when it ends past the window (DynamoDB's
   * update expressions have no {@code max}), a second request that moves the window's end with it.
   * Both are safe to repeat: a retry of either, after the first attempt was applied but its reply
   * lost, meets its own condition again ({@code retain_until >= :lease}, {@code retain_until <=
   * :lease}) and writes the same values.
   */
  boolean extend(ExtendRequest request) {
    long now = request.now().toEpochMilli();
    long lease = now + request.lease().toMillis();
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", string(request.ownerToken()));
    values.put(":in_progress", string(IN_PROGRESS));
    values.put(":lease", number(lease));
    Map<String, String> names = new HashMap<>();
    names.put("#owner", OWNER);
    names.put("#state", STATE);
    names.put("#lease_until", LEASE_UNTIL);
    names.put("#retain_until", RETAIN_UNTIL);
    if (extend(
        request.keyId(),
        "SET #lease_until = :lease",
        FENCE + " AND #retain_until >= :lease",
        names,
        values)) {
      return true;
    }
    names.put("#ttl", items.ttlAttribute());
    values.put(":ttl", number(Items.ttlSeconds(lease)));
    return extend(
        request.keyId(),
        "SET #lease_until = :lease, #retain_until = :lease, #ttl = :ttl",
        FENCE + " AND #retain_until <= :lease",
        names,
        values);
  }

  private boolean extend(
      String keyId,
      String update,
      String condition,
      Map<String, String> names,
      Map<String, AttributeValue> values) {
    try {
      update(
          "extend",
          keyId,
          update,
          condition,
          names,
          values,
          ReturnValue.NONE,
          ReturnValuesOnConditionCheckFailure.NONE);
      return true;
    } catch (ConditionalCheckFailedException e) {
      return false;
    }
  }

  Optional<StoredRecord> find(String keyId, Instant now) {
    Map<String, AttributeValue> item = read(keyId);
    if (Items.absentAt(item, now.toEpochMilli())) {
      return Optional.empty();
    }
    return Optional.of(Items.record(item));
  }

  /**
   * Deletes a settled record inside its window; refuses one in progress:
   *
   * <ol>
   *   <li>one consistent {@code GetItem}: no settled record inside its window, nothing to delete;
   *   <li>one {@code DeleteItem} on condition that the item still holds the owner token read, is
   *       settled and inside its window;
   *   <li>if that condition fails, the record read is gone (a settled record changes no more): it
   *       was deleted by this request's first attempt, whose reply was lost and which the SDK
   *       retried, or at the same moment by another forget of it; either way it is deleted.
   * </ol>
   */
  boolean delete(String keyId, Instant now) {
    Map<String, AttributeValue> item = read(keyId);
    if (Items.absentAt(item, now.toEpochMilli())
        || Items.record(item).state() == RecordState.IN_PROGRESS) { // or unreadable: throws
      return false;
    }
    String owner = Items.text(item, OWNER);
    if (owner == null) {
      throw Items.unreadable("its " + OWNER + " is missing or not a string");
    }
    try {
      deleteItem(
          "forget",
          keyId,
          "#owner = :owner AND #state <> :in_progress AND #retain_until > :now",
          Map.of("#owner", OWNER, "#state", STATE, "#retain_until", RETAIN_UNTIL),
          Map.of(
              ":owner",
              string(owner),
              ":in_progress",
              string(IN_PROGRESS),
              ":now",
              number(now.toEpochMilli())),
          ReturnValuesOnConditionCheckFailure.ALL_OLD);
      return true;
    } catch (ConditionalCheckFailedException e) {
      Map<String, AttributeValue> current = itemAfter(e, keyId);
      return current == null || !owner.equals(Items.text(current, OWNER));
    }
  }
}
