package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyOutcomeUnknownException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.spi.KeyStore;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
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
 * one killed right after the record, on real PostgreSQL and real Redis.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CrashTest {

  static final long LEASE_MS = 6_000;

  RestartablePostgres postgres;
  RestartableRedis redis;

  @BeforeAll
  void startStores() throws Exception {
    postgres = new RestartablePostgres();
    redis = new RestartableRedis(true);
  }

  @AfterAll
  void stopStores() throws Exception {
    postgres.close();
    redis.close();
  }

  Stream<Arguments> stores() {
    return Stream.of(
        Arguments.of("postgresql", postgres.url()), Arguments.of("redis", redis.uri()));
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

    // Inside the lease: the repeat is told the first call is in progress; nothing is sent.
    IdempotencyGuard impatient =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();
    assertThatThrownBy(
            () ->
                impatient.execute(
                    key, ReliabilityChild.TTL, ctx -> "n_" + parentSends.incrementAndGet()))
        .isInstanceOf(IdempotencyInProgressException.class);
    assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt))
        .as("the in-lease check ran inside the lease")
        .isLessThan(LEASE_MS);

    // Strict mode, after the lease: refuses and reports the outcome as unknown; no send.
    IdempotencyGuard strict =
        IdempotencyGuard.builder()
            .store(store)
            .inFlightWait(Duration.ZERO)
            .takeoverPolicy(TakeoverPolicy.REFUSE)
            .build();
    awaitOutcomeUnknown(strict, key);
    assertThat(parentSends).hasValue(0);

    // Default mode, after the lease: taken over at attempt 2 with the same provider key.
    Outcome<String> takeover =
        impatient.executeForOutcome(
            IdempotencyRequest.of(key, ReliabilityChild.TTL),
            ResultCodec.string(),
            ctx -> {
              ReliabilityChild.providerSend(log, ctx);
              return "n_" + parentSends.incrementAndGet();
            });

    List<String> sends = providerLog(log);
    String providerKey = IdempotencyKey.providerKey(key);
    assertThat(takeover.attempt()).isEqualTo(2);
    assertThat(sends).containsExactly(providerKey + " attempt=1", providerKey + " attempt=2");
    assertThat(sends.stream().map(line -> line.split(" ")[0]).distinct())
        .as("a provider that deduplicates by the provider key delivers once")
        .hasSize(1);
    String replay = impatient.execute(key, ReliabilityChild.TTL, ctx -> "again");
    assertThat(replay).isEqualTo("n_1");
  }

  private static void awaitOutcomeUnknown(IdempotencyGuard strict, String key)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try {
        strict.execute(
            key,
            ReliabilityChild.TTL,
            ctx -> {
              throw new AssertionError("strict mode must not send");
            });
        throw new AssertionError("strict mode replayed or sent");
      } catch (IdempotencyOutcomeUnknownException expected) {
        return;
      } catch (IdempotencyInProgressException stillInLease) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("the lease never expired");
        }
        Thread.sleep(100);
      }
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
