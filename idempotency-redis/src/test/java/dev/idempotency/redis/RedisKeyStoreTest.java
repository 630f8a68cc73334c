package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.OperationDeadlines;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreFactory;
import dev.idempotency.tck.SharedKeyStoreContract;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.embedded.RedisServer;

/** The contract and the Redis particulars on a real standalone redis-server 7.0. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisKeyStoreTest extends SharedKeyStoreContract {

  static final Duration TTL = Duration.ofHours(24);

  private RedisServer server;
  private int port;
  private RedisClient client;
  private RedisKeyStore store;
  private StatefulRedisConnection<String, String> admin;

  @BeforeAll
  void startRedis() throws Exception {
    port = FreePorts.next();
    server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    store = RedisKeyStore.builder(client).build();
    admin = client.connect();
  }

  @AfterAll
  void stopRedis() throws Exception {
    if (store != null) {
      store.close();
      admin.close();
      client.shutdown();
    }
    if (server != null) {
      server.stop();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }

  /** The guard's promises on this store (not repeated on older Lettuce: tag {@code guard}). */
  @Nested
  @Tag("guard")
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return RedisKeyStoreTest.this.store();
    }

    /** The completion then meets NOSCRIPT and loads its script again, as after a failover. */
    @Override
    protected void beforeAnInterruptedOutcomeIsWritten() {
      redis().scriptFlush();
    }
  }

  @Override
  protected Class<? extends KeyStoreFactory> factoryClass() {
    return RedisStoreFactory.class;
  }

  @Override
  protected String factoryConfig() {
    return "redis://127.0.0.1:" + port;
  }

  RedisCommands<String, String> redis() {
    return admin.sync();
  }

  static void await(BooleanSupplier condition, String what) throws InterruptedException {
    Poll.within(Duration.ofSeconds(60)).until(what, condition::getAsBoolean);
  }

  @Test
  void firstSendCostsTwoCommandsAndAReplayOne() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    guard.execute("warm-up:" + newKeyId(), TTL, ctx -> "scripts loaded");
    String key = "count:" + newKeyId();

    Map<String, Long> firstSend;
    Map<String, Long> replay;
    try (ClientCommands commands = ClientCommands.watch(List.of(port))) {
      firstSend = commands.during(() -> guard.execute(key, TTL, ctx -> "n_1"));
      replay = commands.during(() -> guard.execute(key, TTL, ctx -> "n_2"));
    }

    System.out.printf("redis commands: first send %s, replay %s%n", firstSend, replay);
    assertThat(firstSend)
        .as("SET NX GET, then the complete script")
        .containsOnly(Map.entry("set", 1L), Map.entry("evalsha", 1L));
    assertThat(replay).as("SET NX GET only, no script").containsOnly(Map.entry("set", 1L));
  }

  @Test
  void aRepeatWhileInProgressAsksTheClaimScriptForTheServersClock() {
    String keyId = newKeyId();
    store.claim(claim(keyId, newToken()));

    Map<String, Long> repeat;
    ClaimResult result;
    try (ClientCommands commands = ClientCommands.watch(List.of(port))) {
      ClaimResult[] seen = new ClaimResult[1];
      repeat = commands.during(() -> seen[0] = store.claim(claim(keyId, newToken())));
      result = seen[0];
    }

    assertThat(repeat).containsOnly(Map.entry("set", 1L), Map.entry("evalsha", 1L));
    assertThat(result).isInstanceOf(ClaimResult.Existing.class);
    ClaimResult.Existing existing = (ClaimResult.Existing) result;
    assertThat(existing.leaseExpired()).isFalse();
    assertThat(existing.record().leaseDeadline())
        .isAfter(existing.record().createdAt())
        .isBefore(existing.record().retentionDeadline());
  }

  /**
   * A campaign's claims are bound by the server's time per key: inside the claim-batch script a new
   * key costs one {@code SET NX GET} and a settled one the same command, as on the single-key path;
   * no separate read (a {@code GET} before each {@code SET} cost the script about half its time).
   */
  @Test
  void aBatchClaimCostsTheServerOneSetPerKeyAndNoRead() {
    List<dev.idempotency.spi.ClaimRequest> fresh = new java.util.ArrayList<>();
    for (int i = 0; i < 500; i++) {
      fresh.add(claim(newKeyId(), newToken()));
    }
    store.claimAll(List.of(claim(newKeyId(), newToken()))); // connected, scripts loaded
    Map<String, Long> before = CommandStats.snapshot(redis());

    List<ClaimResult> claimed = store.claimAll(fresh);
    Map<String, Long> afterClaims = CommandStats.snapshot(redis());
    for (var request : fresh) {
      store.complete(complete(request.keyId(), request.ownerToken(), new byte[] {1}));
    }
    Map<String, Long> beforeReplay = CommandStats.snapshot(redis());
    List<ClaimResult> replayed =
        store.claimAll(fresh.stream().map(r -> claim(r.keyId(), newToken())).toList());
    Map<String, Long> afterReplay = CommandStats.snapshot(redis());

    assertThat(claimed).allMatch(ClaimResult.Claimed.class::isInstance);
    assertThat(replayed).allMatch(ClaimResult.Existing.class::isInstance);
    assertThat(delta(before, afterClaims, "get")).as("reads while claiming new keys").isZero();
    assertThat(delta(before, afterClaims, "set")).as("writes while claiming").isEqualTo(500);
    assertThat(delta(beforeReplay, afterReplay, "get")).as("reads while replaying").isZero();
    assertThat(delta(beforeReplay, afterReplay, "set"))
        .as("SET NX GET per settled key")
        .isEqualTo(500);
  }

  private static long delta(Map<String, Long> before, Map<String, Long> after, String command) {
    return after.getOrDefault(command, 0L) - before.getOrDefault(command, 0L);
  }

  @Test
  void batchOfAThousandKeysCostsTwoCommandsOnStandalone() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    guard
        .claimBatch(
            List.of(dev.idempotency.IdempotencyRequest.of("warm:" + newKeyId(), TTL)),
            dev.idempotency.ResultCodec.string())
        .record();
    List<dev.idempotency.IdempotencyRequest> requests = new java.util.ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      requests.add(dev.idempotency.IdempotencyRequest.of("batch:" + newKeyId(), TTL));
    }

    List<dev.idempotency.Batch<String>> batches = new java.util.ArrayList<>();
    long firstSend;
    long replay;
    try (ClientCommands commands = ClientCommands.watch(List.of(port))) {
      firstSend =
          ClientCommands.total(
              commands.during(
                  () -> {
                    dev.idempotency.Batch<String> batch =
                        guard.claimBatch(requests, dev.idempotency.ResultCodec.string());
                    batch.toSend().forEach(item -> batch.succeeded(item, "n"));
                    batch.record();
                    batches.add(batch);
                  }));
      replay =
          ClientCommands.total(
              commands.during(
                  () ->
                      batches.add(
                          guard.claimBatch(requests, dev.idempotency.ResultCodec.string()))));
    }

    System.out.printf(
        "redis batch of 1,000: first send %d commands, replay %d%n", firstSend, replay);
    assertThat(batches.get(0).claimedKeys()).hasSize(1_000);
    assertThat(batches.get(1).replayed()).hasSize(1_000);
    assertThat(firstSend).isEqualTo(2);
    assertThat(replay).isEqualTo(1);
  }

  @Test
  void recordIsOneStringUnderThePrefixedDigestWithTheWindowAsItsExpiry() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String key = "otp:+15550100042:" + newKeyId();

    guard.execute(key, TTL, ctx -> "n_801");

    String redisKey = "idem:" + IdempotencyKey.digest(key);
    assertThat(redis().type(redisKey)).isEqualTo("string");
    String value = redis().get(redisKey);
    RecordValue record = RecordValue.parse(value.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    assertThat(record.state()).isEqualTo(dev.idempotency.spi.RecordState.COMPLETED);
    assertThat(record.ownerToken())
        .as("kept, to recognise a completion repeated by its owner")
        .hasSize(22);
    assertThat(record.rawKey()).isEmpty();
    assertThat(record.settled().completedAt()).isAfterOrEqualTo(record.settled().createdAt());
    assertThat(value).doesNotContain("+15550100042");
    assertThat(redis().pttl(redisKey)).isBetween(TTL.minusMinutes(1).toMillis(), TTL.toMillis());
  }

  @Test
  void rawKeyIsKeptOnlyWhenAskedFor() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).storeRawKeys(true).build();
    String key = "debug:" + newKeyId();

    guard.execute(key, TTL, ctx -> "n_1");

    byte[] value =
        redis()
            .get("idem:" + IdempotencyKey.digest(key))
            .getBytes(java.nio.charset.StandardCharsets.UTF_8);
    assertThat(RecordValue.parse(value).rawKey()).isEqualTo(key);
  }

  @Test
  void keyPrefixIsValidatedAndUsed() {
    for (String bad : List.of("idem {x}:", "a b", "x*", "pre\nfix", "p".repeat(65), "{tag}")) {
      assertThatThrownBy(() -> RedisKeyStore.builder(client).keyPrefix(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("keyPrefix");
    }
    try (RedisKeyStore prefixed =
        RedisKeyStore.builder(client).keyPrefix("app-1:notify:").build()) {
      String keyId = newKeyId();
      prefixed.claim(claim(keyId, newToken()));
      assertThat(redis().exists("app-1:notify:" + keyId)).isEqualTo(1);
    }
  }

  @Test
  void otpWalkthroughThroughTheGuardSendsOnce() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String key = IdempotencyKey.of("otp", "user_42", "challenge_" + newKeyId());
    AtomicInteger sms = new AtomicInteger();

    String first = guard.execute(key, TTL, ctx -> "n_" + (800 + sms.incrementAndGet()));
    String retry = guard.execute(key, TTL, ctx -> "n_" + (800 + sms.incrementAndGet()));

    assertThat(first).isEqualTo("n_801");
    assertThat(retry).isEqualTo("n_801");
    assertThat(sms).hasValue(1);
  }

  @Test
  void redisStoppedMidRunFailsClosedAndTheSameStoreRecoversWithScriptsReloaded() throws Exception {
    int ownPort = FreePorts.next();
    RedisServer own =
        RedisServer.builder().port(ownPort).setting("bind 127.0.0.1").setting("save \"\"").build();
    own.start();
    RedisClient ownClient =
        RedisClient.create(
            RedisURI.builder()
                .withHost("127.0.0.1")
                .withPort(ownPort)
                .withTimeout(Duration.ofSeconds(2))
                .build());
    ownClient.setOptions(
        ClientOptions.builder()
            .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
            .build());
    try (RedisKeyStore ownStore = RedisKeyStore.builder(ownClient).build()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(ownStore).build();
      AtomicInteger sends = new AtomicInteger();
      String before =
          guard.execute("before:" + newKeyId(), TTL, ctx -> "n_" + sends.incrementAndGet());
      assertThat(before).isEqualTo("n_1");

      own.stop();
      for (int i = 0; i < 5; i++) {
        assertThatThrownBy(
                () ->
                    guard.execute(
                        "during:" + newKeyId(), TTL, ctx -> "n_" + sends.incrementAndGet()))
            .isInstanceOf(KeyStoreException.class);
      }
      assertThat(sends).as("no send while Redis is down").hasValue(1);

      own =
          RedisServer.builder()
              .port(ownPort)
              .setting("bind 127.0.0.1")
              .setting("save \"\"")
              .build();
      own.start();
      String after = "after:" + newKeyId();
      await(
          () -> {
            try {
              guard.execute(after, TTL, ctx -> "n_" + sends.incrementAndGet());
              return true;
            } catch (KeyStoreException e) {
              return false;
            }
          },
          "the store to work again after the restart");
      String replay = guard.execute(after, TTL, ctx -> "n_" + sends.incrementAndGet());

      assertThat(replay).isEqualTo("n_2");
      assertThat(sends).hasValue(2);
      try (StatefulRedisConnection<String, String> check = ownClient.connect()) {
        assertThat(CommandStats.calls(check.sync(), "eval"))
            .as("scripts were sent again after NOSCRIPT")
            .isPositive();
      }
    } finally {
      ownClient.shutdown();
      own.stop();
    }
  }

  @Test
  void waitForReplicasAcceptsAnAcknowledgedClaimAndReleasesAnUnacknowledgedOne() throws Exception {
    int replicaPort = FreePorts.next();
    RedisServer replica =
        RedisServer.builder()
            .port(replicaPort)
            .setting("bind 127.0.0.1")
            .setting("save \"\"")
            .slaveOf("127.0.0.1", port)
            .build();
    replica.start();
    RedisClient replicaClient =
        RedisClient.create(RedisURI.create("redis://127.0.0.1:" + replicaPort));
    try (StatefulRedisConnection<String, String> replicaConnection = replicaClient.connect()) {
      await(
          () -> replicaConnection.sync().info("replication").contains("master_link_status:up"),
          "the replica to sync");
      try (RedisKeyStore waiting =
              RedisKeyStore.builder(client).waitForReplicas(1, Duration.ofSeconds(10)).build();
          RedisKeyStore tooDemanding =
              RedisKeyStore.builder(client).waitForReplicas(2, Duration.ofMillis(200)).build()) {
        String keyId = newKeyId();
        assertThat(waiting.claim(claim(keyId, newToken())))
            .isEqualTo(new ClaimResult.Claimed(1, false));
        assertThat(replicaConnection.sync().exists("idem:" + keyId)).isEqualTo(1);

        String unacknowledged = newKeyId();
        assertThatThrownBy(() -> tooDemanding.claim(claim(unacknowledged, newToken())))
            .isInstanceOf(KeyStoreException.class)
            .hasMessageContaining("acknowledged by 1 of 2 replicas");
        assertThat(store.claim(claim(unacknowledged, newToken())))
            .as("the unacknowledged claim was released")
            .isEqualTo(new ClaimResult.Claimed(1, false));
      }
    } finally {
      replicaClient.shutdown();
      replica.stop();
    }
  }

  /**
   * An async sender adapted from a blocking one must not run on Lettuce's event loop: there it
   * would stall every other Redis call of the process until it returned.
   */
  @Test
  void asyncSendersRunOffTheEventLoopAndABlockingOneDelaysNoOtherCall() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    guard.execute("warm-up:" + newKeyId(), TTL, ctx -> "connection and scripts ready");
    for (int i = 0; i < 3; i++) { // a service's earlier async calls: the path is warm
      guard
          .executeAsync(
              "warm-up:" + newKeyId(),
              TTL,
              dev.idempotency.AsyncSender.of(ctx -> "async path ready"))
          .toCompletableFuture()
          .get(30, TimeUnit.SECONDS);
    }
    List<String> senderThreads = new java.util.concurrent.CopyOnWriteArrayList<>();
    java.util.concurrent.CountDownLatch providerStuck = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.ExecutorService caller =
        java.util.concurrent.Executors.newSingleThreadExecutor();
    try {
      java.util.concurrent.Future<java.util.concurrent.CompletableFuture<String>> blocking =
          caller.submit(
              () ->
                  guard
                      .executeAsync(
                          "blocking:" + newKeyId(),
                          TTL,
                          dev.idempotency.AsyncSender.of(
                              ctx -> {
                                senderThreads.add(Thread.currentThread().getName());
                                providerStuck.countDown();
                                release.await(60, TimeUnit.SECONDS); // a provider call that hangs
                                return "slow";
                              }))
                      .toCompletableFuture());
      assertThat(providerStuck.await(30, TimeUnit.SECONDS)).isTrue();

      long start = System.nanoTime();
      java.util.concurrent.CompletableFuture<List<String>> others =
          java.util.concurrent.CompletableFuture.supplyAsync(
              () -> {
                List<String> results = new java.util.ArrayList<>();
                for (int i = 0; i < 5; i++) {
                  results.add(guard.execute("other:" + newKeyId(), TTL, ctx -> "fast"));
                }
                return results;
              });
      List<String> results = others.get(10, TimeUnit.SECONDS);
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      release.countDown();

      assertThat(results).containsOnly("fast");
      assertThat(millis).as("other calls while the provider hangs").isLessThan(5_000);
      assertThat(blocking.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS)).isEqualTo("slow");
      assertThat(senderThreads)
          .hasSize(1)
          .noneMatch(name -> name.toLowerCase(java.util.Locale.ROOT).contains("lettuce"));
    } finally {
      release.countDown();
      caller.shutdownNow();
    }
  }

  /**
   * Redis stopped under a store built on a client with Lettuce's defaults (60 s command timeout,
   * commands queued while disconnected): every call fails closed within the store's operation
   * timeout, nothing is sent, and once Redis is back the same store works, without a restart, and
   * the claims given up on were never written.
   */
  @Test
  void whileRedisIsDownCallsFailClosedInBoundedTimeAndRecoverAfterwards() throws Exception {
    int ownPort = FreePorts.next();
    RedisServer own =
        RedisServer.builder().port(ownPort).setting("bind 127.0.0.1").setting("save \"\"").build();
    own.start();
    RedisClient ownClient = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + ownPort));
    try (RedisKeyStore ownStore =
        RedisKeyStore.builder(ownClient).operationTimeout(Duration.ofSeconds(1)).build()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(ownStore).build();
      AtomicInteger sends = new AtomicInteger();
      guard.execute("before:" + newKeyId(), TTL, ctx -> "n_" + sends.incrementAndGet());
      own.stop();

      String downKey = "down:" + newKeyId();
      long start = System.nanoTime();
      java.util.concurrent.CompletableFuture<Throwable> call =
          java.util.concurrent.CompletableFuture.supplyAsync(
              () ->
                  org.assertj.core.api.Assertions.catchThrowable(
                      () -> guard.execute(downKey, TTL, ctx -> "n_" + sends.incrementAndGet())));
      Throwable failure = call.get(20, TimeUnit.SECONDS);
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

      assertThat(failure).isInstanceOf(KeyStoreException.class);
      assertThat(millis).as("failed within the operation timeout").isLessThan(5_000);
      assertThat(sends).as("nothing sent while Redis was down").hasValue(1);

      own.start();
      String back = "back:" + newKeyId();
      await(
          () -> {
            try {
              guard.execute(back, TTL, ctx -> "n_back");
              return true;
            } catch (KeyStoreException stillDown) {
              return false;
            }
          },
          "the same store to work again");
      String resent = guard.execute(downKey, TTL, ctx -> "n_" + sends.incrementAndGet());
      assertThat(resent)
          .as("the claim given up on while Redis was down was never written")
          .isEqualTo("n_2");
      await(
          () -> OperationDeadlines.watched() == 0, "no operation left pending once all have ended");
    } finally {
      ownClient.shutdown();
      own.stop();
    }
  }

  /**
   * An in-progress record's times are derived from the key's expiry and the server's clock. Read
   * again and again, with nothing changed, it reports the same window's end and creation time each
   * time. They were derived from {@code TIME} and {@code PTTL}, which inside a script count from
   * two different instants (the real time, and the script's frozen start), so one read in a few
   * dozen reported them a millisecond later, and the store kit's {@code
   * takeoverKeepsTheRetentionDeadline} failed now and then.
   */
  @Test
  void anInProgressRecordReportsTheSameTimesOnEveryRead() {
    String keyId = newKeyId();
    store().claim(claim(keyId, newToken()));
    StoredRecord first = existing(store().claim(claim(keyId, newToken())));
    Set<Instant> deadlines = new TreeSet<>();
    Set<Instant> created = new TreeSet<>();
    for (int i = 0; i < 500; i++) {
      StoredRecord claimed = existing(store().claim(claim(keyId, newToken())));
      StoredRecord found = store().find(keyId, T0).orElseThrow();
      deadlines.add(claimed.retentionDeadline());
      deadlines.add(found.retentionDeadline());
      created.add(claimed.createdAt());
      created.add(found.createdAt());
    }
    assertThat(deadlines)
        .as("window ends reported by 1,000 reads")
        .containsExactly(first.retentionDeadline());
    assertThat(created)
        .as("creation times reported by 1,000 reads")
        .containsExactly(first.createdAt());
  }

  /**
   * A record whose key was made persistent by hand ({@code PERSIST}: the store never writes one
   * without an expiry) has no window end to derive. {@code PEXPIRETIME} answers -1 for it, which
   * was taken for an expiry in 1970, so a read reported the record's window as ended in 1969; it
   * reads now as {@code PTTL}'s -1 always made it read: a window ended a millisecond ago.
   */
  @Test
  void anInProgressRecordWithoutAnExpiryReadsAsJustEnded() {
    String keyId = newKeyId();
    store().claim(claim(keyId, newToken()));
    assertThat(redis().persist(store.redisKey(keyId))).isTrue();

    Instant before = Instant.now();
    StoredRecord found = store().find(keyId, T0).orElseThrow();

    assertThat(found.retentionDeadline())
        .as("the window end of a record without an expiry")
        .isBetween(before.minusSeconds(60), Instant.now().plusSeconds(60));
  }

  /**
   * A blocking call is bounded by its caller's own timed wait: it fails at the operation timeout
   * while Redis holds every client (CLIENT PAUSE), and no {@link OperationDeadlines} watch is kept
   * for it meanwhile (a watch per call cost the replay path its map entries and two futures).
   */
  @Test
  void aBlockingCallIsBoundedByItsOwnWaitWithoutAWatch() throws Exception {
    RedisClient ownClient = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    try (RedisKeyStore ownStore =
        RedisKeyStore.builder(ownClient).operationTimeout(Duration.ofMillis(500)).build()) {
      ownStore.claim(claim(newKeyId(), newToken()));
      await(() -> OperationDeadlines.watched() == 0, "no operation pending before the pause");

      redis().clientPause(3_000);
      long start = System.nanoTime();
      java.util.concurrent.CompletableFuture<Throwable> call =
          java.util.concurrent.CompletableFuture.supplyAsync(
              () ->
                  org.assertj.core.api.Assertions.catchThrowable(
                      () -> ownStore.claim(claim(newKeyId(), newToken()))));
      int mostWatched = OperationDeadlines.watched();
      while (!finishedWithin(call, 5)) {
        mostWatched = Math.max(mostWatched, OperationDeadlines.watched());
      }
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

      assertThat(call.get())
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("did not claim within 500 ms (operation timeout)");
      assertThat(millis)
          .as("failed at the operation timeout, not when the pause ended")
          .isLessThan(2_500);
      assertThat(mostWatched).as("watches kept while the blocking claim waited").isZero();
    } finally {
      await(
          () -> {
            try {
              return "PONG".equals(redis().ping());
            } catch (RuntimeException paused) {
              return false;
            }
          },
          "the pause to end");
      ownClient.shutdown();
    }
  }

  /** Waits on {@code call} itself, at most {@code millis}: whether it has finished. */
  private static boolean finishedWithin(java.util.concurrent.Future<?> call, long millis)
      throws Exception {
    try {
      call.get(millis, TimeUnit.MILLISECONDS);
      return true;
    } catch (java.util.concurrent.TimeoutException stillRunning) {
      return false;
    }
  }

  @Test
  void builderRefusesBadSettings() {
    assertThatThrownBy(() -> RedisKeyStore.builder((RedisClient) null))
        .isInstanceOf(NullPointerException.class);
    assertThatThrownBy(
            () -> RedisKeyStore.builder(client).waitForReplicas(0, Duration.ofSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RedisKeyStore.builder(client).maxPayloadBytes(0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RedisKeyStore.builder(client).operationTimeout(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("operationTimeout");
  }

  @Test
  void unreachableRedisAtBuildTimeBuildsAStoreWhoseOperationsFailClosed() {
    RedisClient nowhere =
        RedisClient.create(RedisURI.create("redis://127.0.0.1:" + FreePorts.next()));
    try (RedisKeyStore unreachable = RedisKeyStore.builder(nowhere).build()) {
      assertThat(unreachable.awaitConnection(Duration.ofSeconds(5))).isFalse();
      assertThatThrownBy(() -> unreachable.claim(claim(newKeyId(), newToken())))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("Redis store");
    } finally {
      nowhere.shutdown();
    }
  }
}
