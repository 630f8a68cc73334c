package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ScanRequest;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemRequest;

/**
 * probe42h (lazy37b's fix, SPEC 14) on DynamoDB (dynalite): an item the store holds but cannot read
 * (its {@code state} is not one of the store's states, as a hand edit or another writer leaves it).
 * lazy37b made such a record on Redis and JDBC "that lookup's error" ({@link
 * UnreadableRecordException}), with the breaker kept closed; the DynamoDB store was not changed.
 * Its lookup throws the parser's {@code IllegalArgumentException} (which {@code find}'s Javadoc
 * gives for an invalid key), and a claim of that key opens the breaker: the next send of a healthy
 * key is refused at once.
 */
@Tag("open-finding")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbUnreadableItemProbeTest {

  private static final Duration TTL = Duration.ofHours(1);
  private static final int ROUNDS = 10;

  private DynamoDbClient client;

  @BeforeAll
  void startStore() {
    client = DynaliteClients.client(Dynalite.shared().endpoint());
  }

  @AfterAll
  void stopStore() {
    client.close();
  }

  @Test
  void aLookupOfAnUnreadableItemIsThatRecordsErrorAndOtherSendsGoOn() {
    String table = "unreadable-find-" + UUID.randomUUID();
    try (DynamoDbKeyStore store = store(table);
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      damage(table);

      List<String> refusedOthers = new ArrayList<>();
      List<Class<?>> lookupErrors = new ArrayList<>();
      for (int round = 0; round < ROUNDS; round++) {
        try {
          guard.find(damaged);
          lookupErrors.add(Void.class);
        } catch (RuntimeException lookupError) {
          lookupErrors.add(lookupError.getClass());
        }
        try {
          guard.execute("order:" + UUID.randomUUID(), TTL, ctx -> "other sent");
        } catch (KeyStoreException refused) {
          refusedOthers.add(refused.getMessage());
        }
      }
      SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(lookupErrors)
                .as("the documented error for a record the store cannot read")
                .containsOnly(UnreadableRecordException.class);
            softly
                .assertThat(refusedOthers)
                .as("sends of healthy keys right after a lookup of the unreadable item")
                .isEmpty();
          });
    }
  }

  @Test
  void aClaimOfAnUnreadableItemDoesNotRefuseOtherKeys() {
    String table = "unreadable-claim-" + UUID.randomUUID();
    try (DynamoDbKeyStore store = store(table);
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      damage(table);

      AtomicInteger damagedSends = new AtomicInteger();
      List<String> refusedOthers = new ArrayList<>();
      for (int round = 0; round < ROUNDS; round++) {
        assertThatThrownBy(
                () ->
                    guard.execute(
                        damaged,
                        TTL,
                        ctx -> {
                          damagedSends.incrementAndGet();
                          return "sent again";
                        }))
            .isInstanceOf(KeyStoreException.class);
        try {
          guard.execute("order:" + UUID.randomUUID(), TTL, ctx -> "other sent");
        } catch (KeyStoreException refused) {
          refusedOthers.add(refused.getMessage());
        }
      }
      assertThat(damagedSends).as("the unreadable key is never sent again").hasValue(0);
      assertThat(refusedOthers)
          .as("sends of healthy keys right after a claim of the unreadable key")
          .isEmpty();
    }
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
