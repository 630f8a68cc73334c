package dev.idempotency.dynamodb;

import static dev.idempotency.dynamodb.Items.ATTEMPT;
import static dev.idempotency.dynamodb.Items.LEASE_UNTIL;
import static dev.idempotency.dynamodb.Items.OWNER;
import static dev.idempotency.dynamodb.Items.RETAIN_UNTIL;
import static dev.idempotency.dynamodb.Items.STATE;
import static dev.idempotency.dynamodb.Items.number;
import static dev.idempotency.dynamodb.Items.string;

import dev.idempotency.KeyStoreException;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.BatchGetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.KeysAndAttributes;
import software.amazon.awssdk.services.dynamodb.model.ReturnValuesOnConditionCheckFailure;

/**
 * Claims, one key at a time or a batch:
 *
 * <ol>
 *   <li>one conditional {@code PutItem} of a new in-progress item, on condition that there is no
 *       item or only one past its window ({@code retain_until <= now});
 *   <li>if the condition fails, the item that made it fail: DynamoDB returns it with the failure
 *       ({@code ReturnValuesOnConditionCheckFailure=ALL_OLD}); where it does not (dynalite, which
 *       accepts the parameter but returns no item), one consistent {@code GetItem} reads it;
 *   <li>an in-progress item whose lease has lapsed is taken over by one {@code UpdateItem} on
 *       condition that it still holds the owner token and lease deadline that were read;
 *   <li>a takeover whose condition fails (the item changed meanwhile) goes on from the item that
 *       refused it, or from step 1 if it is gone;
 *   <li>an item that holds this claim's own owner token and lease is this claim's own write: the
 *       put or takeover was applied, its reply lost or late, and the SDK's retry refused by it. The
 *       claim succeeded (owner tokens are unique per claim, so no other caller's item matches).
 * </ol>
 *
 * <p>A batch reads its keys first with consistent {@code BatchGetItem}s (100 keys each), answers
 * the keys held by a live record at once, and claims the others by the steps above, in parallel.
 */
final class DynamoDbClaims {

  /** How often one claim starts again because the item changed under it before giving up. */
  private static final int MAX_ROUNDS = 16;

  private static final int BATCH_GET_KEYS = 100;

  private final Requests requests;
  private final Items items;
  private final DynamoDbWrites writes;
  private final Parallel parallel;

  DynamoDbClaims(Requests requests, Items items, DynamoDbWrites writes, Parallel parallel) {
    this.requests = requests;
    this.items = items;
    this.writes = writes;
    this.parallel = parallel;
  }

  ClaimResult claim(ClaimRequest request) {
    return claim(request, null, false);
  }

  /**
   * Claims from what is known of the item: nothing ({@code known} false), or the item a batch read
   * found (null if there was none).
   */
  private ClaimResult claim(
      ClaimRequest request, @Nullable Map<String, AttributeValue> seen, boolean known) {
    long now = request.now().toEpochMilli();
    Map<String, AttributeValue> item = seen;
    boolean itemKnown = known;
    for (int round = 0; round < MAX_ROUNDS; round++) {
      if (!itemKnown || Items.absentAt(item, now)) {
        try {
          put(request, now);
          return new ClaimResult.Claimed(1, false);
        } catch (ConditionalCheckFailedException e) {
          item = writes.itemAfter(e, request.keyId());
          if (Items.absentAt(item, now)) {
            itemKnown = false; // deleted or ended between the put and the read: put again
            continue;
          }
        }
      }
      if (Items.claimedBy(item, request)) {
        // this claim's own write, applied although its reply was lost or came after the attempt
        // timeout: the SDK's retry was refused by it. No other request holds this owner token.
        int attempt = Items.attempt(Objects.requireNonNull(item));
        return new ClaimResult.Claimed(attempt, attempt > 1);
      }
      StoredRecord record = Items.record(Objects.requireNonNull(item));
      boolean leaseExpired =
          record.state() == RecordState.IN_PROGRESS && record.leaseDeadline().toEpochMilli() <= now;
      if (leaseExpired
          && request.takeOverExpiredLease()
          && record.fingerprint().equals(request.fingerprint())) {
        try {
          takeOver(request, item, record, now);
          return new ClaimResult.Claimed(record.attempt() + 1, true);
        } catch (ConditionalCheckFailedException e) {
          // changed since it was read, or this takeover's own write refused the SDK's retry
          item = writes.itemAfter(e, request.keyId());
          itemKnown = true;
          continue;
        }
      }
      return new ClaimResult.Existing(record, leaseExpired);
    }
    throw new KeyStoreException(
        "DynamoDB store: the claim of a key on table "
            + requests.table()
            + " did not settle after "
            + MAX_ROUNDS
            + " rounds of concurrent changes",
        null);
  }

  private void put(ClaimRequest request, long now) {
    requests.send(
        "claim",
        () ->
            requests
                .client()
                .putItem(
                    put ->
                        put.tableName(requests.table())
                            .item(items.claimed(request))
                            .conditionExpression(
                                "attribute_not_exists(#pk) OR #retain_until <= :now")
                            .expressionAttributeNames(
                                Map.of("#pk", items.partitionKey(), "#retain_until", RETAIN_UNTIL))
                            .expressionAttributeValues(Map.of(":now", number(now)))
                            .returnValuesOnConditionCheckFailure(
                                ReturnValuesOnConditionCheckFailure.ALL_OLD)
                            .overrideConfiguration(requests.override())));
  }

  /**
   * Takes over a lapsed lease, on condition that the item still holds what was read.
   *
   * @throws ConditionalCheckFailedException if it does not
   */
  private void takeOver(
      ClaimRequest request, Map<String, AttributeValue> item, StoredRecord record, long now) {
    long lease = now + request.lease().toMillis();
    long retain = Math.max(record.retentionDeadline().toEpochMilli(), lease);
    Map<String, String> names = new HashMap<>();
    names.put("#owner", OWNER);
    names.put("#attempt", ATTEMPT);
    names.put("#lease_until", LEASE_UNTIL);
    names.put("#retain_until", RETAIN_UNTIL);
    names.put("#state", STATE);
    names.put("#ttl", items.ttlAttribute());
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", string(request.ownerToken()));
    values.put(":attempt", number(record.attempt() + 1L));
    values.put(":lease", number(lease));
    values.put(":retain", number(retain));
    values.put(":ttl", number(Items.ttlSeconds(retain)));
    values.put(":seen_owner", item.get(OWNER));
    values.put(":seen_lease", item.get(LEASE_UNTIL));
    values.put(":in_progress", string(RecordState.IN_PROGRESS.name()));
    requests.send(
        "take over",
        () ->
            requests
                .client()
                .updateItem(
                    update ->
                        update
                            .tableName(requests.table())
                            .key(items.key(request.keyId()))
                            .updateExpression(
                                "SET #owner = :owner, #attempt = :attempt,"
                                    + " #lease_until = :lease, #retain_until = :retain,"
                                    + " #ttl = :ttl")
                            .conditionExpression(
                                "#owner = :seen_owner AND #lease_until = :seen_lease"
                                    + " AND #state = :in_progress")
                            .expressionAttributeNames(names)
                            .expressionAttributeValues(values)
                            .returnValuesOnConditionCheckFailure(
                                ReturnValuesOnConditionCheckFailure.ALL_OLD)
                            .overrideConfiguration(requests.override())));
  }

  /**
   * Claims a batch: its items read in consistent batch reads, then the keys not held by a live
   * record claimed in parallel. A key whose claim failed is reported in its slot.
   */
  List<ClaimResult> claimAll(List<ClaimRequest> batch) {
    Map<String, Map<String, AttributeValue>> found = readAll(batch);
    List<java.util.concurrent.Callable<ClaimResult>> tasks = new ArrayList<>(batch.size());
    ClaimResult[] results = new ClaimResult[batch.size()];
    List<Integer> pending = new ArrayList<>();
    for (int i = 0; i < batch.size(); i++) {
      ClaimRequest request = batch.get(i);
      Map<String, AttributeValue> item =
          found.get(items.key(request.keyId()).get(items.partitionKey()).s());
      long now = request.now().toEpochMilli();
      StoredRecord record;
      try {
        record = Items.absentAt(item, now) ? null : Items.record(item);
      } catch (UnreadableRecordException e) {
        results[i] = new ClaimResult.Failed(e); // that key's error: the others are claimed
        continue;
      }
      if (record != null) {
        boolean leaseExpired =
            record.state() == RecordState.IN_PROGRESS
                && record.leaseDeadline().toEpochMilli() <= now;
        if (!leaseExpired
            || !request.takeOverExpiredLease()
            || !record.fingerprint().equals(request.fingerprint())) {
          results[i] = new ClaimResult.Existing(record, leaseExpired);
          continue;
        }
      }
      pending.add(i);
      tasks.add(
          () -> {
            try {
              return claim(request, item, true);
            } catch (KeyStoreException e) {
              return new ClaimResult.Failed(e);
            }
          });
    }
    List<ClaimResult> claimed = parallel.runAll(tasks);
    for (int j = 0; j < pending.size(); j++) {
      results[pending.get(j)] = claimed.get(j);
    }
    return List.of(results);
  }

  /** The items of a batch's keys by partition key value, read consistently, 100 keys a request. */
  private Map<String, Map<String, AttributeValue>> readAll(List<ClaimRequest> batch) {
    Map<String, Map<String, AttributeValue>> found = new HashMap<>();
    for (int from = 0; from < batch.size(); from += BATCH_GET_KEYS) {
      List<Map<String, AttributeValue>> keys = new ArrayList<>();
      for (ClaimRequest request :
          batch.subList(from, Math.min(batch.size(), from + BATCH_GET_KEYS))) {
        keys.add(items.key(request.keyId()));
      }
      for (int round = 0; !keys.isEmpty(); round++) {
        if (round == MAX_ROUNDS) {
          // fail closed: nothing of the batch has been claimed yet
          throw new KeyStoreException(
              "DynamoDB store: a batch read on table "
                  + requests.table()
                  + " still had "
                  + keys.size()
                  + " keys unprocessed after "
                  + MAX_ROUNDS
                  + " rounds (DynamoDB leaves keys unprocessed when it throttles the table or when"
                  + " a response would exceed its size limit, as large results can); nothing was"
                  + " claimed",
              null);
        }
        if (round > 0) {
          // unprocessed keys (throttling or a response's size limit): back off before asking again
          java.util.concurrent.locks.LockSupport.parkNanos(
              java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(Math.min(1_000, 25L << round)));
        }
        List<Map<String, AttributeValue>> ask = keys;
        BatchGetItemResponse response =
            requests.send(
                "batch read",
                () ->
                    requests
                        .client()
                        .batchGetItem(
                            get ->
                                get.requestItems(
                                        Map.of(
                                            requests.table(),
                                            KeysAndAttributes.builder()
                                                .keys(ask)
                                                .consistentRead(true)
                                                .build()))
                                    .overrideConfiguration(requests.override())));
        for (Map<String, AttributeValue> item :
            response.responses().getOrDefault(requests.table(), List.of())) {
          found.put(item.get(items.partitionKey()).s(), item);
        }
        KeysAndAttributes unprocessed = response.unprocessedKeys().get(requests.table());
        keys = unprocessed == null ? List.of() : unprocessed.keys();
      }
    }
    return found;
  }
}
