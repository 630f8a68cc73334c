package dev.idempotency.dynamodb;

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
 * window ({@code retain_until > now}, since TTL deletion lags by up to days): complete, release and
 * extend (a take-back is {@link DynamoDbTakeBack}'s, on these requests); and the operator's find
 * and delete.
 */
final class DynamoDbWrites {

  static final String IN_PROGRESS = RecordState.IN_PROGRESS.name();
  static final String FENCE = "#owner = :owner AND #state = :in_progress";

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

  /** One conditional {@code UpdateItem} of a key id, named {@code operation} in its failures. */
  UpdateItemResponse update(
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
  void deleteItem(
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

  /**
   * Renews a lease, fenced by the owner token alone (not by the window on the owner's clock, which
   * may have run ahead: a renewal lost to it would let another process take over a live send): one
   * request while the new lease ends inside the window; when it ends past the window (DynamoDB's
   * update expressions have no {@code max}), a second request that moves the window's end with it.
   * Both are safe to repeat: a retry of either, after the first attempt was applied but its reply
   * lost, meets its own condition again ({@code retain_until >= :lease}, {@code retain_until <=
   * :lease}) and writes the same values.
   *
   * <p>Neither moves a lease back ({@code lease_until <= :lease}): a renewal the client gave up on
   * that reaches the table after a newer one leaves the newer, later lease. When both conditions
   * fail, the item read back tells a claim still held under a later lease (renewed: {@code true})
   * from one lost (another owner, settled or gone: {@code false}).
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
        FENCE + " AND #retain_until >= :lease AND #lease_until <= :lease",
        names,
        values)) {
      return true;
    }
    names.put("#ttl", items.ttlAttribute());
    values.put(":ttl", number(Items.ttlSeconds(lease)));
    if (extend(
        request.keyId(),
        "SET #lease_until = :lease, #retain_until = :lease, #ttl = :ttl",
        FENCE + " AND #retain_until <= :lease AND #lease_until <= :lease",
        names,
        values)) {
      return true;
    }
    return heldUnderLaterLease(read(request.keyId()), request.ownerToken(), lease);
  }

  /** Whether an item is this owner's claim, in progress, leased to {@code lease} or later. */
  private static boolean heldUnderLaterLease(
      @Nullable Map<String, AttributeValue> item, String ownerToken, long lease) {
    return item != null
        && ownerToken.equals(Items.text(item, OWNER))
        && IN_PROGRESS.equals(Items.text(item, STATE))
        && item.containsKey(LEASE_UNTIL)
        && Items.millis(item, LEASE_UNTIL) >= lease;
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
