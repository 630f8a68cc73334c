package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Dynalite;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Requests and capacity units per first send, per replay and per batch of 1,000, counted at the
 * HTTP client and from {@code ReturnConsumedCapacity} on dynalite (docs/stores.md quotes them).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DynamoDbCostTest {

  private static final Duration TTL = Duration.ofHours(72);

  private final InterceptedHttpClient http =
      new InterceptedHttpClient(DynaliteClients.http().build());
  private final ConsumedCapacity capacity = new ConsumedCapacity();
  private DynamoDbClient client;
  private DynamoDbKeyStore store;

  @BeforeAll
  void open() {
    client =
        DynamoDbClient.builder()
            .endpointOverride(Dynalite.shared().endpoint())
            .region(software.amazon.awssdk.regions.Region.US_EAST_1)
            .credentialsProvider(
                software.amazon.awssdk.auth.credentials.StaticCredentialsProvider.create(
                    software.amazon.awssdk.auth.credentials.AwsBasicCredentials.create(
                        "test", "test")))
            .httpClient(http)
            .overrideConfiguration(c -> c.addExecutionInterceptor(capacity))
            .build();
    store =
        DynamoDbKeyStore.builder(client)
            .tableName("idempotency-cost")
            // generous: an attempt timed out on a busy machine is retried, and a retry is counted
            .operationTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .attemptTimeout(DynamoDbKeyStoreTest.TEST_OPERATION_TIMEOUT)
            .createTableIfMissing(true)
            .build();
  }

  @AfterAll
  void close() {
    store.close();
    client.close();
  }

  private void reset() {
    http.resetCounts();
    capacity.reset();
  }

  @Test
  void aFirstSendCostsAConditionalPutAndAnUpdateAndAReplayOneRefusedPut() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String key = "otp:" + UUID.randomUUID();

    reset();
    guard.execute(key, TTL, ctx -> "msg_1");
    Map<String, Long> firstSend = http.counts();
    double firstSendUnits = capacity.units();

    reset();
    String replayed = guard.execute(key, TTL, ctx -> "msg_2");
    Map<String, Long> replay = http.counts();
    double replayUnits = capacity.units();
    guard.close();

    System.out.printf(
        "dynamodb requests: first send %s (%.1f capacity units reported), replay %s (%.1f"
            + " reported; the refused put is charged 1 WCU by DynamoDB)%n",
        firstSend, firstSendUnits, replay, replayUnits);
    assertThat(replayed).isEqualTo("msg_1");
    assertThat(firstSend).containsOnly(Map.entry("PutItem", 1L), Map.entry("UpdateItem", 1L));
    assertThat(firstSendUnits).as("two writes of an item under 1 KB").isEqualTo(2.0);
    assertThat(replay)
        .as("the refused put, then the read dynalite needs (it returns no item with the failure)")
        .containsOnly(Map.entry("PutItem", 1L), Map.entry("GetItem", 1L));
    assertThat(replayUnits).as("one strongly consistent read under 4 KB").isEqualTo(1.0);
  }

  @Test
  void aBatchOfAThousandCostsTenBatchReadsAndAWritePerKeyAndItsReplayTenReads() {
    Instant now = Instant.now();
    List<ClaimRequest> batch = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      batch.add(
          new ClaimRequest(
              UUID.randomUUID().toString(),
              UUID.randomUUID().toString(),
              "",
              now,
              Duration.ofMinutes(1),
              TTL,
              true,
              null));
    }

    reset();
    List<ClaimResult> claimed = store.claimAll(batch);
    List<CompleteRequest> outcomes = new ArrayList<>();
    for (ClaimRequest request : batch) {
      outcomes.add(
          new CompleteRequest(
              request.keyId(),
              request.ownerToken(),
              RecordState.COMPLETED,
              "msg".getBytes(StandardCharsets.UTF_8),
              now));
    }
    List<Boolean> completed = store.completeAll(outcomes);
    Map<String, Long> firstSends = http.counts();
    double firstSendUnits = capacity.units();

    reset();
    List<ClaimResult> replayed =
        store.claimAll(
            batch.stream().map(r -> r.withOwnerToken(UUID.randomUUID().toString())).toList());
    Map<String, Long> replays = http.counts();
    double replayUnits = capacity.units();

    System.out.printf(
        "dynamodb requests for 1,000 keys: first sends %s (%.1f capacity units), replays %s (%.1f)%n",
        firstSends, firstSendUnits, replays, replayUnits);
    assertThat(claimed).allMatch(ClaimResult.Claimed.class::isInstance);
    assertThat(completed).containsOnly(true);
    assertThat(replayed).allMatch(ClaimResult.Existing.class::isInstance);
    assertThat(firstSends)
        .containsOnly(
            Map.entry("BatchGetItem", 10L),
            Map.entry("PutItem", 1_000L),
            Map.entry("UpdateItem", 1_000L));
    assertThat(replays).containsOnly(Map.entry("BatchGetItem", 10L));
  }
}
