package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.UnreadableRecordContract;
import dev.idempotency.testservers.Dynalite;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ScanRequest;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemRequest;

/**
 * Regression test of probe42h's finding (lazy37b's fix, SPEC 14) on DynamoDB (dynalite): an item
 * the store holds but cannot read (its {@code state} is not one of the store's states, as a hand
 * edit or another writer leaves it). lazy37b made such a record on Redis and JDBC "that lookup's
 * error" ({@link UnreadableRecordException}), with the breaker kept closed; the DynamoDB store was
 * not changed. Its lookup throws the parser's {@code IllegalArgumentException} (which {@code
 * find}'s Javadoc gives for an invalid key), and a claim of that key opens the breaker: the next
 * send of a healthy key is refused at once. Now the store throws {@link UnreadableRecordException}
 * for such an item (an unknown state, an attribute missing or of another type), on lookups and
 * claims, blocking or in a batch beside healthy keys, and the breaker stays closed: {@link
 * UnreadableRecordContract} (a table per test, an unknown state), and here the DynamoDB-specific
 * damage (an attribute missing, or of another type).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbUnreadableItemTest extends UnreadableRecordContract {

  private DynamoDbClient client;

  @BeforeAll
  void startStore() {
    client = DynaliteClients.client(Dynalite.shared().endpoint());
  }

  @AfterAll
  void stopStore() {
    client.close();
  }

  @Override
  protected KeyStore newStore(String name) {
    return store(table(name));
  }

  @Override
  protected void damageTheOnlyRecord(String name) {
    damage(table(name));
  }

  private static String table(String name) {
    return "unreadable-" + name;
  }

  @Test
  void anItemMissingAnAttributeFailsForItsKeyAloneInABatch() {
    String table = "unreadable-batch-" + UUID.randomUUID();
    try (DynamoDbKeyStore store = store(table);
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      update(table, "REMOVE #a", Items.RETAIN_UNTIL, null);
      assertThatThrownBy(() -> guard.find(damaged)).isInstanceOf(UnreadableRecordException.class);

      assertABatchRefusesItAlone(guard, damaged);
      assertThat(guard.execute("order:" + UUID.randomUUID(), TTL, ctx -> "other sent"))
          .as("a healthy key's send right after")
          .isEqualTo("other sent");
    }
  }

  @Test
  void anAttemptThatIsNotANumberIsUnreadable() {
    String table = "unreadable-attempt-" + UUID.randomUUID();
    try (DynamoDbKeyStore store = store(table);
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      update(table, "SET #a = :v", Items.ATTEMPT, AttributeValue.fromS("one"));
      assertThatThrownBy(() -> guard.find(damaged)).isInstanceOf(UnreadableRecordException.class);
      assertThatThrownBy(() -> guard.execute(damaged, TTL, ctx -> "sent again"))
          .isInstanceOf(UnreadableRecordException.class);
      assertThatThrownBy(() -> guard.forget(damaged)).isInstanceOf(UnreadableRecordException.class);
      assertThat(guard.execute("order:" + UUID.randomUUID(), TTL, ctx -> "other sent"))
          .isEqualTo("other sent");
    }
  }

  /**
   * Issue 39/37 (SPEC 1): an item that becomes unreadable while its send runs fails the recording
   * of that key alone. The store's {@code completeAll} rethrows that item's {@link
   * UnreadableRecordException} for the whole batch (its other writes done); before the fix the
   * guard counted every key of the batch as not recorded and handed them all to the background
   * writer, which tried the same batch again each round and put the batches after it back untried.
   * Now the guard writes such a batch again key by key.
   */
  @Test
  void anItemDamagedWhileItsSendRunsIsTheOnlyOutcomeOfItsBatchNotRecorded() {
    String table = "unreadable-record-" + UUID.randomUUID();
    try (DynamoDbKeyStore store = store(table);
        IdempotencyGuard guard =
            IdempotencyGuard.builder().store(store).storeRawKeys(true).build()) {
      String damaged = "order:" + UUID.randomUUID();
      List<IdempotencyRequest> requests = new ArrayList<>();
      requests.add(IdempotencyRequest.of(damaged, TTL));
      for (int i = 0; i < 4; i++) {
        requests.add(IdempotencyRequest.of("order:" + UUID.randomUUID(), TTL));
      }
      Batch.Recorded recorded;
      try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
        List<Batch.Item> items = new ArrayList<>();
        batch.toSend().forEach(items::add);
        assertThat(items).hasSize(5);
        damageItemOf(table, damaged);
        for (Batch.Item item : items) {
          batch.succeeded(item, "batch sent");
        }
        recorded = batch.record();
      }
      assertThat(recorded.notRecorded()).containsExactly(damaged);
      assertThat(recorded.completed()).isEqualTo(4);
    }
  }

  /** Sets the state of the item of a raw key (the guard keeps raw keys) to an unknown value. */
  private void damageItemOf(String table, String key) {
    List<Map<String, AttributeValue>> items =
        client.scan(ScanRequest.builder().tableName(table).build()).items().stream()
            .filter(item -> key.equals(Items.text(item, Items.RAW_KEY)))
            .toList();
    assertThat(items).hasSize(1);
    String id = DynamoDbKeyStore.DEFAULT_PARTITION_KEY;
    client.updateItem(
        UpdateItemRequest.builder()
            .tableName(table)
            .key(Map.of(id, items.get(0).get(id)))
            .updateExpression("SET #s = :damaged")
            .expressionAttributeNames(Map.of("#s", Items.STATE))
            .expressionAttributeValues(Map.of(":damaged", AttributeValue.fromS("DAMAGED")))
            .build());
  }

  /** Applies an update expression to the table's one item: {@code #a} names the attribute. */
  private void update(String table, String expression, String attribute, AttributeValue value) {
    List<Map<String, AttributeValue>> items =
        client.scan(ScanRequest.builder().tableName(table).build()).items();
    assertThat(items).hasSize(1);
    String id = DynamoDbKeyStore.DEFAULT_PARTITION_KEY;
    UpdateItemRequest.Builder request =
        UpdateItemRequest.builder()
            .tableName(table)
            .key(Map.of(id, items.get(0).get(id)))
            .updateExpression(expression)
            .expressionAttributeNames(Map.of("#a", attribute));
    if (value != null) {
      request.expressionAttributeValues(Map.of(":v", value));
    }
    client.updateItem(request.build());
  }

  private DynamoDbKeyStore store(String table) {
    return DynamoDbKeyStore.builder(client)
        .tableName(table)
        .createTableIfMissing(true)
        .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
        .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
        .build();
  }

  /** Sets the state of the table's one item to a value the store does not know. */
  private void damage(String table) {
    List<Map<String, AttributeValue>> items =
        client.scan(ScanRequest.builder().tableName(table).build()).items();
    assertThat(items).hasSize(1);
    String id = DynamoDbKeyStore.DEFAULT_PARTITION_KEY;
    client.updateItem(
        UpdateItemRequest.builder()
            .tableName(table)
            .key(Map.of(id, items.get(0).get(id)))
            .updateExpression("SET #s = :damaged")
            .expressionAttributeNames(Map.of("#s", Items.STATE))
            .expressionAttributeValues(Map.of(":damaged", AttributeValue.fromS("DAMAGED")))
            .build());
  }
}
