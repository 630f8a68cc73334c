package dev.idempotency.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.testservers.Dynalite;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/** Scratch probes of issue 40 that held (not part of the committed findings). */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class HeldScratchProbeTest {

  private static final String TABLE = "idempotency-probe-races";
  private static final Duration LEASE = Duration.ofSeconds(1);
  private static final Duration WINDOW = Duration.ofSeconds(3);
  private static final int THREADS = 16;

  private final List<DynamoDbClient> clients = new ArrayList<>();
  private final List<DynamoDbKeyStore> stores = new ArrayList<>();
  private ExecutorService pool;

  @BeforeAll
  void start() {
    for (int i = 0; i < 2; i++) {
      DynamoDbClient client =
          DynaliteClients.client(Dynalite.shared().endpoint(), DynaliteClients.http().build());
      clients.add(client);
      stores.add(
          DynamoDbKeyStore.builder(client)
              .tableName(TABLE)
              .operationTimeout(Duration.ofSeconds(15))
              .attemptTimeout(Duration.ofSeconds(15))
              .createTableIfMissing(true)
              .build());
    }
    pool = Executors.newFixedThreadPool(THREADS);
  }

  @AfterAll
  void stop() {
    pool.shutdownNow();
    stores.forEach(DynamoDbKeyStore::close);
    clients.forEach(DynamoDbClient::close);
  }

  private static ClaimRequest claim(String keyId, String token, Instant now) {
    return new ClaimRequest(keyId, token, "", now, LEASE, WINDOW, true, null);
  }

  private List<ClaimResult> race(List<Callable<ClaimResult>> tasks) throws Exception {
    CountDownLatch go = new CountDownLatch(1);
    List<Future<ClaimResult>> futures = new ArrayList<>();
    for (Callable<ClaimResult> task : tasks) {
      futures.add(
          pool.submit(
              () -> {
                go.await();
                return task.call();
              }));
    }
    go.countDown();
    List<ClaimResult> results = new ArrayList<>();
    for (Future<ClaimResult> f : futures) {
      results.add(f.get(2, TimeUnit.MINUTES));
    }
    return results;
  }

  @Test
  void takeoverRaceHasOneWinnerAndFencesTheOldOwner() throws Exception {
    Instant t0 = Instant.parse("2030-01-01T00:00:00Z");
    for (int round = 0; round < 25; round++) {
      String keyId = "takeover" + UUID.randomUUID().toString().replace("-", "");
      assertThat(stores.get(0).claim(claim(keyId, "old", t0)))
          .isInstanceOf(ClaimResult.Claimed.class);
      Instant later = t0.plusMillis(1_500);
      List<Callable<ClaimResult>> tasks = new ArrayList<>();
      List<String> tokens = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        String token = "t" + t;
        tokens.add(token);
        DynamoDbKeyStore store = stores.get(t % 2);
        tasks.add(() -> store.claim(claim(keyId, token, later)));
      }
      List<ClaimResult> results = race(tasks);
      List<Integer> winners = new ArrayList<>();
      for (int i = 0; i < results.size(); i++) {
        if (results.get(i) instanceof ClaimResult.Claimed c) {
          assertThat(c.attempt()).isEqualTo(2);
          assertThat(c.takeover()).isTrue();
          winners.add(i);
        }
      }
      assertThat(winners).hasSize(1);
      DynamoDbKeyStore other = stores.get(1);
      assertThat(
              other.complete(
                  new CompleteRequest(keyId, "old", RecordState.COMPLETED, new byte[] {1}, later)))
          .isFalse();
      assertThat(other.extend(new ExtendRequest(keyId, "old", LEASE, later))).isFalse();
      assertThat(other.release(keyId, "old")).isFalse();
      String winner = tokens.get(winners.get(0));
      assertThat(
              other.complete(
                  new CompleteRequest(keyId, winner, RecordState.COMPLETED, new byte[] {2}, later)))
          .isTrue();
      assertThat(other.find(keyId, later).orElseThrow().payload()).containsExactly(2);
    }
  }

  @Test
  void expiredWindowRaceHasOneWinner() throws Exception {
    Instant t0 = Instant.parse("2030-01-02T00:00:00Z");
    for (int round = 0; round < 25; round++) {
      String keyId = "expired" + UUID.randomUUID().toString().replace("-", "");
      assertThat(stores.get(0).claim(claim(keyId, "old", t0)))
          .isInstanceOf(ClaimResult.Claimed.class);
      if (round % 2 == 0) {
        assertThat(
                stores
                    .get(0)
                    .complete(
                        new CompleteRequest(
                            keyId, "old", RecordState.COMPLETED, new byte[] {1}, t0)))
            .isTrue();
      }
      Instant later = t0.plus(WINDOW);
      List<Callable<ClaimResult>> tasks = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        String token = "t" + t;
        DynamoDbKeyStore store = stores.get(t % 2);
        tasks.add(() -> store.claim(claim(keyId, token, later)));
      }
      long wins =
          race(tasks).stream()
              .filter(r -> r instanceof ClaimResult.Claimed c && c.attempt() == 1)
              .count();
      assertThat(wins).isEqualTo(1);
      assertThat(
              stores
                  .get(1)
                  .complete(
                      new CompleteRequest(
                          keyId, "old", RecordState.COMPLETED, new byte[] {9}, later)))
          .isFalse();
      assertThat(stores.get(1).release(keyId, "old")).isFalse();
    }
  }

  @Test
  void batchesAndSingleClaimsInMixedStatesClaimEachKeyOnce() throws Exception {
    Instant t0 = Instant.parse("2030-01-03T00:00:00Z");
    Instant later = t0.plusMillis(1_500); // leases of t0 lapsed, windows of t0 live
    List<String> keyIds = new ArrayList<>();
    List<String> claimable = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      String keyId = "batch" + i + "x" + UUID.randomUUID().toString().replace("-", "");
      keyIds.add(keyId);
      switch (i % 4) {
        case 0 -> claimable.add(keyId); // absent
        case 1 -> { // completed, live
          stores.get(0).claim(claim(keyId, "old", t0));
          stores
              .get(0)
              .complete(new CompleteRequest(keyId, "old", RecordState.COMPLETED, new byte[0], t0));
        }
        case 2 -> { // in progress, lapsed lease
          stores.get(0).claim(claim(keyId, "old", t0));
          claimable.add(keyId);
        }
        default -> { // in progress, live lease
          stores.get(0).claim(claim(keyId, "live", later.minusMillis(100)));
        }
      }
    }
    CountDownLatch go = new CountDownLatch(1);
    List<Future<List<String>>> futures = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      int thread = t;
      DynamoDbKeyStore store = stores.get(t % 2);
      futures.add(
          pool.submit(
              () -> {
                go.await();
                List<String> order = new ArrayList<>(keyIds);
                java.util.Collections.shuffle(order, new Random(thread));
                List<String> won = new ArrayList<>();
                if (thread % 2 == 0) {
                  List<ClaimRequest> batch = new ArrayList<>();
                  for (String keyId : order) {
                    batch.add(claim(keyId, "b" + thread, later));
                  }
                  List<ClaimResult> results = store.claimAll(batch);
                  for (int i = 0; i < order.size(); i++) {
                    assertThat(results.get(i)).isNotInstanceOf(ClaimResult.Failed.class);
                    if (results.get(i) instanceof ClaimResult.Claimed) {
                      won.add(order.get(i));
                    }
                  }
                } else {
                  for (String keyId : order) {
                    if (store.claim(claim(keyId, "s" + thread, later))
                        instanceof ClaimResult.Claimed) {
                      won.add(keyId);
                    }
                  }
                }
                return won;
              }));
    }
    go.countDown();
    List<String> allWon = new ArrayList<>();
    for (Future<List<String>> f : futures) {
      allWon.addAll(f.get(3, TimeUnit.MINUTES));
    }
    assertThat(allWon).doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(claimable);
  }

  @Test
  void aResultAtTheLimitWithTheLongestRawKeyAndPrefixIsStoredByteExact() {
    DynamoDbKeyStore store =
        DynamoDbKeyStore.builder(clients.get(0)).tableName(TABLE).keyPrefix("p".repeat(64)).build();
    Instant now = Instant.now();
    String keyId = "k".repeat(ClaimRequest.MAX_KEY_ID_LENGTH);
    String rawKey = "\u4e2d".repeat(1_024);
    ClaimRequest request =
        new ClaimRequest(
            keyId,
            "owner",
            "f".repeat(64),
            now,
            Duration.ofMinutes(1),
            Duration.ofHours(1),
            true,
            rawKey);
    assertThat(store.claim(request)).isInstanceOf(ClaimResult.Claimed.class);
    byte[] payload = new byte[DynamoDbKeyStore.DEFAULT_MAX_PAYLOAD_BYTES];
    new Random(7).nextBytes(payload);
    assertThat(
            store.complete(
                new CompleteRequest(keyId, "owner", RecordState.COMPLETED, payload, now)))
        .isTrue();
    StoredRecord record = store.find(keyId, now).orElseThrow();
    assertThat(record.payload()).isEqualTo(payload);
    store.close();
  }

  /**
   * Did NOT hold on dynalite: its BatchGetItem returns 3 items of ~400 KB a round (real DynamoDB:
   * up to 16 MB), so 100 keys need 34 rounds and the store gives up after 16 ("throttled").
   */
  @Test
  void aBatchOfLargeResultsOver16MbIsReplayedWhole() {
    DynamoDbKeyStore store = stores.get(0);
    Instant now = Instant.now();
    List<ClaimRequest> batch = new ArrayList<>();
    byte[] payload = new byte[DynamoDbKeyStore.DEFAULT_MAX_PAYLOAD_BYTES];
    new Random(3).nextBytes(payload);
    for (int i = 0; i < 100; i++) {
      String keyId = "large" + i + "x" + UUID.randomUUID().toString().replace("-", "");
      ClaimRequest request =
          new ClaimRequest(
              keyId, "o", "", now, Duration.ofMinutes(1), Duration.ofHours(1), true, null);
      batch.add(request);
      assertThat(store.claim(request)).isInstanceOf(ClaimResult.Claimed.class);
      assertThat(
              store.complete(new CompleteRequest(keyId, "o", RecordState.COMPLETED, payload, now)))
          .isTrue();
    }
    List<ClaimRequest> again = new ArrayList<>();
    for (ClaimRequest request : batch) {
      again.add(request.withOwnerToken("again"));
    }
    List<ClaimResult> results = store.claimAll(again);
    assertThat(results).hasSize(100);
    for (ClaimResult result : results) {
      assertThat(result).isInstanceOf(ClaimResult.Existing.class);
      assertThat(((ClaimResult.Existing) result).record().payload()).isEqualTo(payload);
    }
  }
}
