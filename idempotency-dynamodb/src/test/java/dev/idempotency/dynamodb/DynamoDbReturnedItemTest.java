package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Dynalite;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The path real DynamoDB takes on a repeat: the refused {@code PutItem} brings back the item that
 * refused it ({@code ReturnValuesOnConditionCheckFailure=ALL_OLD}), and the store answers from it
 * without a {@code GetItem}. dynalite returns no item, so the HTTP client puts it into the error as
 * DynamoDB does ({@link ConditionFailureItems}); requests are counted at the wire.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbReturnedItemTest {

  private static final String TABLE = "idempotency-returned-item";
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
    http.returnItemsOnConditionFailure(
        new ConditionFailureItems(reader, DynamoDbKeyStore.DEFAULT_PARTITION_KEY));
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

  private static ClaimRequest claim(String keyId, Instant now, Duration lease) {
    return new ClaimRequest(keyId, UUID.randomUUID().toString(), "", now, lease, TTL, true, null);
  }

  @Test
  void aCompletedRecordIsReplayedFromTheRefusedPutAlone() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    ClaimRequest first = claim(keyId, now, LEASE);
    assertThat(store.claim(first)).isEqualTo(new ClaimResult.Claimed(1, false));
    byte[] result = "n_1 \u00e9\u0000".getBytes(StandardCharsets.UTF_8);
    assertThat(
            store.complete(
                new CompleteRequest(keyId, first.ownerToken(), RecordState.COMPLETED, result, now)))
        .isTrue();
    http.resetCounts();

    ClaimResult repeat = store.claim(claim(keyId, now.plusSeconds(1), LEASE));

    assertThat(repeat).isInstanceOf(ClaimResult.Existing.class);
    ClaimResult.Existing existing = (ClaimResult.Existing) repeat;
    assertThat(existing.record().state()).isEqualTo(RecordState.COMPLETED);
    assertThat(existing.record().payload()).isEqualTo(result);
    assertThat(existing.record().attempt()).isEqualTo(1);
    assertThat(existing.leaseExpired()).isFalse();
    assertThat(http.counts()).as("one refused put, no read").isEqualTo(Map.of("PutItem", 1L));
  }

  @Test
  void aRecordInProgressIsReportedFromTheRefusedPutAlone() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    assertThat(store.claim(claim(keyId, now, LEASE))).isInstanceOf(ClaimResult.Claimed.class);
    http.resetCounts();

    ClaimResult repeat = store.claim(claim(keyId, now.plusSeconds(1), LEASE));

    assertThat(repeat).isInstanceOf(ClaimResult.Existing.class);
    ClaimResult.Existing existing = (ClaimResult.Existing) repeat;
    assertThat(existing.record().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(existing.record().payload()).isNull();
    assertThat(existing.leaseExpired()).isFalse();
    assertThat(http.counts()).as("one refused put, no read").isEqualTo(Map.of("PutItem", 1L));
  }

  @Test
  void aLapsedLeaseIsTakenOverFromTheRefusedPutWithoutARead() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    assertThat(store.claim(claim(keyId, now, Duration.ofSeconds(1))))
        .isInstanceOf(ClaimResult.Claimed.class);
    http.resetCounts();

    ClaimRequest taker = claim(keyId, now.plusSeconds(2), LEASE);
    ClaimResult takeover = store.claim(taker);

    assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
    assertThat(http.counts())
        .as("one refused put and the fenced takeover, no read")
        .isEqualTo(Map.of("PutItem", 1L, "UpdateItem", 1L));
    ClaimResult late = store.claim(claim(keyId, now.plusSeconds(2), LEASE));
    assertThat(late).as("the taker holds it now").isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) late).record().attempt()).isEqualTo(2);
  }

  @Test
  void aRecordPastItsWindowIsClaimedAfreshByThePutItself() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    ClaimRequest first =
        new ClaimRequest(
            keyId, "owner-1", "", now, Duration.ofSeconds(1), Duration.ofSeconds(2), true, null);
    assertThat(store.claim(first)).isInstanceOf(ClaimResult.Claimed.class);
    assertThat(
            store.complete(
                new CompleteRequest(keyId, "owner-1", RecordState.COMPLETED, new byte[] {1}, now)))
        .isTrue();
    http.resetCounts();

    ClaimResult after = store.claim(claim(keyId, now.plusSeconds(3), LEASE));

    assertThat(after).isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(http.counts()).isEqualTo(Map.of("PutItem", 1L));
  }

  @Test
  void aCompleteRetriedAfterItsReplyWasLostIsRecognisedFromTheReturnedItem() {
    String keyId = UUID.randomUUID().toString();
    Instant now = Instant.now();
    ClaimRequest first = claim(keyId, now, LEASE);
    store.claim(first);
    CompleteRequest outcome =
        new CompleteRequest(keyId, first.ownerToken(), RecordState.COMPLETED, new byte[] {7}, now);
    assertThat(store.complete(outcome)).isTrue();
    http.resetCounts();

    assertThat(store.complete(outcome)).as("the same owner's same outcome: written").isTrue();
    assertThat(
            store.complete(
                new CompleteRequest(
                    keyId, "someone-else", RecordState.COMPLETED, new byte[0], now)))
        .as("another owner's: refused")
        .isFalse();
    assertThat(http.counts()).isEqualTo(Map.of("UpdateItem", 2L));
  }

  @Test
  void theGuardReplaysFromTheReturnedItemAndSendsOnce() {
    AtomicInteger sends = new AtomicInteger();
    String key = "returned:" + UUID.randomUUID();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      Outcome<String> first =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL),
              ResultCodec.string(),
              ctx -> "sent " + sends.incrementAndGet());
      http.resetCounts();
      Outcome<String> repeat =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, TTL),
              ResultCodec.string(),
              ctx -> "sent " + sends.incrementAndGet());

      assertThat(first.replayed()).isFalse();
      assertThat(repeat.replayed()).isTrue();
      assertThat(repeat.value()).isEqualTo("sent 1");
      assertThat(sends).hasValue(1);
      assertThat(http.counts()).isEqualTo(Map.of("PutItem", 1L));
    }
  }
}
