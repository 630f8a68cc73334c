package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.protocols.jsoncore.JsonNode;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * An item that vanishes under a claim, as DynamoDB's TTL deletion removes one (dynalite never does,
 * so the test deletes it at the wire, just before the store's next request): between the refused
 * {@code PutItem} and its {@code GetItem}, and between that read and the takeover's {@code
 * UpdateItem}. The store must claim afresh: never answer with a record that is gone, never let one
 * call send twice.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbVanishedItemTest {

  private static final String TABLE = "idempotency-vanished-item";
  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration LEASE = Duration.ofMinutes(1);

  private DynamoDbClient reader;
  private InterceptedHttpClient http;
  private DynamoDbClient client;
  private DynamoDbKeyStore store;

  @BeforeAll
  void startStore() {
    reader = DynaliteClients.client(Dynalite.shared().endpoint());
    http = new InterceptedHttpClient(DynaliteClients.http().build());
    client = DynaliteClients.client(Dynalite.shared().endpoint(), http);
    store =
        DynamoDbKeyStore.builder(client)
            .tableName(TABLE)
            .createTableIfMissing(true)
            .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .build();
  }

  @AfterAll
  void stopStore() {
    store.close();
    client.close();
    reader.close();
  }

  @BeforeEach
  void countFromZero() {
    http.resetCounts();
  }

  @AfterEach
  void backToDynalite() {
    http.returnItemsOnConditionFailure(null);
  }

  /** Deletes the item the request is about, as TTL deletion would, and counts it. */
  private void deleteTheItem(JsonNode request, AtomicInteger deleted) {
    String id =
        ConditionFailureItems.partitionKeyValue(request, DynamoDbKeyStore.DEFAULT_PARTITION_KEY);
    reader.deleteItem(
        delete ->
            delete
                .tableName(TABLE)
                .key(Map.of(DynamoDbKeyStore.DEFAULT_PARTITION_KEY, AttributeValue.fromS(id))));
    deleted.incrementAndGet();
  }

  private static ClaimRequest claim(String keyId, String owner, Instant now, Duration lease) {
    return new ClaimRequest(keyId, owner, "", now, lease, TTL, true, null);
  }

  @Test
  void anItemDeletedBetweenTheRefusedPutAndItsReadIsClaimedAfresh() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    store.claim(claim(keyId, "first", now, LEASE));
    store.complete(new CompleteRequest(keyId, "first", RecordState.COMPLETED, new byte[] {1}, now));
    AtomicInteger deleted = new AtomicInteger();
    http.beforeNext("GetItem", request -> deleteTheItem(request, deleted));
    http.resetCounts();

    ClaimResult result = store.claim(claim(keyId, "second", now.plusSeconds(1), LEASE));

    assertThat(deleted).as("the item vanished before the read").hasValue(1);
    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(http.counts())
        .as("refused put, read of nothing, put again")
        .isEqualTo(Map.of("PutItem", 2L, "GetItem", 1L));
    ClaimResult.Existing held =
        (ClaimResult.Existing) store.claim(claim(keyId, "third", now.plusSeconds(1), LEASE));
    assertThat(held.record().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(
            store.complete(
                new CompleteRequest(keyId, "second", RecordState.COMPLETED, new byte[] {2}, now)))
        .as("the second claim owns the new item")
        .isTrue();
  }

  @Test
  void anItemDeletedBetweenItsReadAndTheTakeoverIsClaimedAfresh() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    store.claim(claim(keyId, "crashed", now, Duration.ofSeconds(1)));
    AtomicInteger deleted = new AtomicInteger();
    http.beforeNext("UpdateItem", request -> deleteTheItem(request, deleted));
    http.resetCounts();

    ClaimResult result = store.claim(claim(keyId, "taker", now.plusSeconds(2), LEASE));

    assertThat(deleted).hasValue(1);
    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(http.counts())
        .as("refused put, read, refused takeover, read (no item), put again")
        .isEqualTo(Map.of("PutItem", 2L, "GetItem", 2L, "UpdateItem", 1L));
  }

  @Test
  void anItemReturnedWithTheRefusalAndDeletedBeforeTheTakeoverIsClaimedAfresh() {
    http.returnItemsOnConditionFailure(
        new ConditionFailureItems(reader, DynamoDbKeyStore.DEFAULT_PARTITION_KEY));
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    store.claim(claim(keyId, "crashed", now, Duration.ofSeconds(1)));
    AtomicInteger deleted = new AtomicInteger();
    http.beforeNext("UpdateItem", request -> deleteTheItem(request, deleted));
    http.resetCounts();

    ClaimResult result = store.claim(claim(keyId, "taker", now.plusSeconds(2), LEASE));

    assertThat(deleted).hasValue(1);
    assertThat(result).isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(http.counts())
        .as("refused put (item returned), refused takeover, read (no item), put again")
        .isEqualTo(Map.of("PutItem", 2L, "GetItem", 1L, "UpdateItem", 1L));
  }

  @Test
  void anOwnerWhoseItemVanishedCanNeitherCompleteNorRenewNorReleaseIt() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    store.claim(claim(keyId, "owner", now, LEASE));
    reader.deleteItem(
        delete ->
            delete
                .tableName(TABLE)
                .key(Map.of(DynamoDbKeyStore.DEFAULT_PARTITION_KEY, AttributeValue.fromS(keyId))));

    assertThat(
            store.complete(
                new CompleteRequest(keyId, "owner", RecordState.COMPLETED, new byte[] {1}, now)))
        .isFalse();
    assertThat(store.extend(new ExtendRequest(keyId, "owner", LEASE, now))).isFalse();
    assertThat(store.release(keyId, "owner")).isFalse();
    assertThat(store.find(keyId, now)).as("nothing was written back").isEmpty();
  }

  @Test
  void aRepeatWhoseRecordVanishesSendsOnceAndIsNotAReplay() {
    AtomicInteger sends = new AtomicInteger();
    String key = "vanished:" + UUID.randomUUID();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .isEqualTo("sent 1");
      AtomicInteger deleted = new AtomicInteger();
      http.beforeNext("GetItem", request -> deleteTheItem(request, deleted));

      Outcome<String> afterDeletion =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL),
              ResultCodec.string(),
              ctx -> "sent " + sends.incrementAndGet());

      assertThat(deleted).hasValue(1);
      assertThat(afterDeletion.replayed()).as("nothing left to replay").isFalse();
      assertThat(afterDeletion.value()).isEqualTo("sent 2");
      assertThat(afterDeletion.attempt()).isEqualTo(1);
      assertThat(afterDeletion.recorded()).isTrue();
      assertThat(sends).as("one send per call").hasValue(2);
      assertThat(guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()))
          .as("the new record replays")
          .isEqualTo("sent 2");
      assertThat(sends).hasValue(2);
    }
  }
}
