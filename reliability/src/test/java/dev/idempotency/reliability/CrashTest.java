package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyOutcomeUnknownException;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * SPEC section 1: a process killed (SIGKILL) between the provider's acceptance and the record, and
 * one killed right after the record, on real PostgreSQL, Redis and DynamoDB (dynalite).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CrashTest {

  static final long LEASE_MS = 6_000;

  /** Processes that race for the takeover once the lease has lapsed: exactly one may send. */
  static final int TAKERS = 4;

  RestartablePostgres postgres;
  RestartableRedis redis;
  RestartableDynalite dynalite;

  @BeforeAll
  void startStores() throws Exception {
    postgres = new RestartablePostgres();
    redis = new RestartableRedis(true);
    dynalite = new RestartableDynalite();
  }

  @AfterAll
  void stopStores() throws Exception {
    postgres.close();
    redis.close();
    dynalite.close();
  }

  Stream<Arguments> stores() {
    return Stream.of(
        Arguments.of("postgresql", postgres.url()),
        Arguments.of("redis", redis.uri()),
        Arguments.of("dynamodb", dynalite.spec()));
  }

  static List<String> providerLog(Path log) throws Exception {
    return Files.exists(log) ? Files.readAllLines(log, StandardCharsets.UTF_8) : List.of();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("stores")
  void crashBetweenSendAndRecord(String name, String spec, @TempDir Path dir) throws Exception {
    String key = IdempotencyKey.of("otp", "user_42", "crash-" + UUID.randomUUID());
    Path log = dir.resolve("provider.log");
    KeyStore store = Stores.open(spec, 4);
    AtomicInteger parentSends = new AtomicInteger();

    try (ChildJvm child =
        new ChildJvm(
            dir, "crash-before-record", spec, key, Long.toString(LEASE_MS), log.toString())) {
      child.await("SENT", 180);
      child.kill();
    }
    long killedAt = System.nanoTime();

    // Until the lease lapses the key stays in progress at attempt 1 and every repeat is refused
    // as in progress; then strict mode refuses and reports the outcome as unknown. No send.
    IdempotencyGuard strict =
        IdempotencyGuard.builder()
            .store(store)
            .inFlightWait(Duration.ZERO)
            .takeoverPolicy(TakeoverPolicy.REFUSE)
            .build();
    int refusals = refusedUntilTheLeaseLapses(strict, key);
    assertThat(refusals).as("repeats refused as in progress inside the lease").isPositive();
    assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt))
        .as("the lease lapsed within a minute of the kill")
        .isLessThan(60_000);

    // Default mode, after the lease: several processes race; exactly one takes the key over at
    // attempt 2 with the same provider key and sends (the crash duplicate), the others replay it.
    List<Outcome<String>> outcomes = raceForTheTakeover(store, key, log, parentSends);
    List<Outcome<String>> sent = outcomes.stream().filter(o -> !o.replayed()).toList();
    assertThat(sent).as("takeovers that sent").hasSize(1);
    assertThat(sent.get(0).attempt()).isEqualTo(2);
    assertThat(outcomes).extracting(Outcome::value).containsOnly("n_1");
    assertThat(parentSends).as("sends after the crash").hasValue(1);

    List<String> sends = providerLog(log);
    String providerKey = IdempotencyKey.providerKey(key);
    assertThat(sends).containsExactly(providerKey + " attempt=1", providerKey + " attempt=2");
    assertThat(sends.stream().map(line -> line.split(" ")[0]).distinct())
        .as("a provider that deduplicates by the provider key delivers once")
        .hasSize(1);
    String replay = strict.execute(key, ReliabilityChild.TTL, ctx -> "again");
    assertThat(replay).isEqualTo("n_1");
  }

  /**
   * Calls the key in strict mode, again and again, until the outcome is reported unknown: until
   * then each call must be refused as in progress, with the record in progress at attempt 1, and
   * the report must come no earlier than the lease's end as the store gave it (the store's clock is
   * this host's). Strict mode never sends, so no call here can be a send.
   *
   * @return how many calls were refused as in progress
   */
  private static int refusedUntilTheLeaseLapses(IdempotencyGuard strict, String key)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    int refusals = 0;
    while (true) {
      IdempotencyRecord record = strict.find(key).orElseThrow();
      assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
      assertThat(record.attempt()).isEqualTo(1);
      try {
        strict.execute(
            key,
            ReliabilityChild.TTL,
            ctx -> {
              throw new AssertionError("strict mode must not send");
            });
        throw new AssertionError("strict mode replayed or sent");
      } catch (IdempotencyOutcomeUnknownException lapsed) {
        assertThat(Instant.now())
            .as("reported unknown only once the lease had lapsed")
            .isAfterOrEqualTo(record.leaseExpiresAt().minusMillis(50));
        return refusals;
      } catch (IdempotencyInProgressException stillInLease) {
        refusals++;
        assertThat(System.nanoTime()).as("the lease lapses").isLessThan(deadline);
        Thread.sleep(100);
      }
    }
  }

  /**
   * {@value #TAKERS} guards (as many processes would) call the key at once; each waits for a call
   * in flight, so the losers replay the winner's result.
   */
  private static List<Outcome<String>> raceForTheTakeover(
      KeyStore store, String key, Path log, AtomicInteger sends) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(TAKERS);
    try {
      CountDownLatch start = new CountDownLatch(1);
      List<Future<Outcome<String>>> futures = new ArrayList<>();
      for (int i = 0; i < TAKERS; i++) {
        IdempotencyGuard taker =
            IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofSeconds(60)).build();
        futures.add(
            pool.submit(
                () -> {
                  start.await();
                  return taker.executeForOutcome(
                      IdempotencyRequest.of(key, ReliabilityChild.TTL),
                      ResultCodec.string(),
                      ctx -> {
                        ReliabilityChild.providerSend(log, ctx);
                        return "n_" + sends.incrementAndGet();
                      });
                }));
      }
      start.countDown();
      List<Outcome<String>> outcomes = new ArrayList<>();
      for (Future<Outcome<String>> future : futures) {
        outcomes.add(future.get(120, TimeUnit.SECONDS));
      }
      return outcomes;
    } finally {
      pool.shutdownNow();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("stores")
  void crashRightAfterRecordReplays(String name, String spec, @TempDir Path dir) throws Exception {
    String key = IdempotencyKey.of("otp", "user_42", "recorded-" + UUID.randomUUID());
    Path log = dir.resolve("provider.log");

    try (ChildJvm child = new ChildJvm(dir, "crash-after-record", spec, key, log.toString())) {
      child.await("RECORDED", 180);
      child.kill();
    }
    IdempotencyGuard guard = IdempotencyGuard.builder().store(Stores.open(spec, 2)).build();
    String replay = guard.execute(key, ReliabilityChild.TTL, ctx -> "duplicate");

    assertThat(replay).isEqualTo("n_child");
    assertThat(providerLog(log)).hasSize(1);
  }
}
