package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import dev.idempotency.testservers.RedisBinary;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

/**
 * SPEC 1 and 6 on a real Redis (issue 39/37): Redis stops after a call claimed its key and before
 * its outcome is written, and starts again with its data (an append-only file). The caller gets its
 * result at once; the guard goes on writing the outcome in the background, so that a Redis back
 * within the lease ends COMPLETED and a repeat replays without a second send, while a Redis that
 * stays down past the lease is given up on, bounded, and nothing hangs.
 */
class RedisOutcomeWriteRetryTest {

  static final Duration TTL = Duration.ofHours(1);
  static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

  private Path dir;
  private int port;
  private RedisServer server;
  private RedisClient client;
  private RedisKeyStore store;
  private final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();

  @BeforeEach
  void startRedis() throws IOException {
    dir = Files.createTempDirectory("outcome-write-redis");
    port = FreePorts.next();
    startServer();
    client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    store = RedisKeyStore.builder(client).operationTimeout(Duration.ofMillis(500)).build();
    assertThat(store.awaitConnection(Duration.ofSeconds(60))).as("connected to Redis").isTrue();
  }

  @AfterEach
  void stopRedis() throws IOException {
    store.close();
    client.shutdown();
    if (server != null) {
      server.stop();
    }
    try (var files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(RedisOutcomeWriteRetryTest::delete);
    }
  }

  private void startServer() {
    server =
        RedisServer.builder()
            .redisExecProvider(RedisBinary.provider())
            .port(port)
            .setting("bind 127.0.0.1")
            .setting("appendonly yes")
            .setting("appendfsync always")
            .setting("save \"\"")
            .setting("dir " + dir)
            .build();
    RedisBinary.start(server);
  }

  private IdempotencyGuard guard(Duration lease) {
    return IdempotencyGuard.builder()
        .store(store)
        .lease(lease)
        .closeGracePeriod(Duration.ofSeconds(1))
        .listener(events::add)
        .build();
  }

  @Test
  void anOutcomeRedisCouldNotTakeIsWrittenOnceItIsBackWithinTheLease() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofSeconds(30));
    String key = "restart:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    String first =
        guard.execute(
            key,
            TTL,
            ctx -> {
              sends.incrementAndGet();
              server.stop();
              return "sent";
            });
    assertThat(events).extracting(IdempotencyEvent::type).contains(Type.OUTCOME_NOT_RECORDED);
    startServer();

    awaitTrue(() -> completed(guard, key), "the outcome written in the background");
    String repeat = guard.execute(key, TTL, ctx -> "sent twice: " + sends.incrementAndGet());

    assertThat(first).isEqualTo("sent");
    assertThat(repeat).isEqualTo("sent");
    assertThat(sends).hasValue(1);
    // the write's end is reported after the store took it: it may come after the repeat
    awaitTrue(
        () ->
            events.stream()
                .anyMatch(
                    event ->
                        event.type() == Type.OUTCOME_RECORDED_LATE
                            || event.type() == Type.OUTCOME_ABANDONED),
        "the background write's end reported");
    assertThat(events)
        .extracting(IdempotencyEvent::type)
        .contains(Type.OUTCOME_RECORDED_LATE)
        .doesNotContain(Type.OUTCOME_ABANDONED);
    guard.close();
  }

  @Test
  void aBatchsOutcomesRedisCouldNotTakeAreWrittenOnceItIsBack() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofSeconds(30));
    List<String> keys = List.of("batch:" + UUID.randomUUID(), "batch:" + UUID.randomUUID());
    Batch.Recorded recorded;
    try (Batch<String> batch =
        guard.claimBatch(
            keys.stream().map(key -> IdempotencyRequest.of(key, TTL)).toList(),
            ResultCodec.string())) {
      for (Batch.Item item : batch.toSend()) {
        batch.succeeded(item, "sent " + item.key());
      }
      server.stop();
      recorded = batch.record();
    }
    startServer();

    awaitTrue(
        () -> completed(guard, keys.get(0)) && completed(guard, keys.get(1)),
        "both outcomes written in the background");

    assertThat(recorded.notRecorded()).containsExactlyInAnyOrderElementsOf(keys);
    for (String key : keys) {
      assertThat(guard.execute(key, TTL, ctx -> "sent twice")).isEqualTo("sent " + key);
    }
    guard.close();
  }

  @Test
  void aRedisThatStaysDownPastTheLeaseIsGivenUpOnAndNothingHangs() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofSeconds(4));
    String key = "down:" + UUID.randomUUID();

    Outcome<String> outcome =
        guard
            .executeForOutcomeAsync(
                IdempotencyRequest.of(key, TTL),
                ResultCodec.string(),
                ctx -> {
                  server.stop();
                  return java.util.concurrent.CompletableFuture.completedFuture("sent");
                })
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);

    awaitTrue(() -> has(Type.OUTCOME_ABANDONED), "the background write to give up");
    long closeStart = System.nanoTime();
    guard.close();
    long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closeStart);

    assertThat(outcome.value()).isEqualTo("sent");
    assertThat(outcome.recorded()).isFalse();
    assertThat(events)
        .extracting(IdempotencyEvent::type)
        .contains(Type.OUTCOME_NOT_RECORDED)
        .doesNotContain(Type.OUTCOME_RECORDED_LATE);
    assertThat(closeMillis).as("close() with nothing pending").isLessThan(5_000);
  }

  /** Whether the key's record is COMPLETED; false while Redis does not answer yet. */
  static boolean completed(IdempotencyGuard guard, String key) {
    try {
      return guard.find(key).map(r -> r.state() == RecordState.COMPLETED).orElse(false);
    } catch (KeyStoreException stillDown) {
      return false;
    }
  }

  private boolean has(Type type) {
    return events.stream().anyMatch(event -> event.type() == type);
  }

  static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
    Poll.within(Duration.ofNanos(WAIT_NANOS)).until(what, condition::getAsBoolean);
  }

  private static void delete(Path file) {
    try {
      Files.deleteIfExists(file);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
