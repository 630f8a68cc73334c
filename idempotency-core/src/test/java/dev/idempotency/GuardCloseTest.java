package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@link IdempotencyGuard#close()}: the threads it started end, and it refuses calls after. */
class GuardCloseTest {

  static final Duration TTL = Duration.ofHours(1);
  final KeyStore store = InMemoryKeyStore.builder().build();

  static String key() {
    return "close:" + UUID.randomUUID();
  }

  /** The names of the live threads of one guard. */
  static List<String> threadsOf(IdempotencyGuard guard) {
    String prefix = guard.settings().executors.threadPrefix;
    return Thread.getAllStackTraces().keySet().stream()
        .filter(Thread::isAlive)
        .map(Thread::getName)
        .filter(name -> name.startsWith(prefix))
        .toList();
  }

  /**
   * A command-line program that used a guard's async path, its lease keeper and a batch exits
   * promptly once it closes the guard: no thread of the guard is left (exec:java waits for them).
   */
  @Test
  void closeEndsEveryThreadTheGuardStarted() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).lease(Duration.ofMillis(200)).build();
    guard
        .executeAsync(
            key(), TTL, ctx -> java.util.concurrent.CompletableFuture.completedFuture("async"))
        .toCompletableFuture()
        .get(30, TimeUnit.SECONDS);
    guard.execute(
        key(),
        TTL,
        ctx -> {
          Thread.sleep(300); // long enough for the keeper to renew once
          return "slow";
        });
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key(), TTL)), ResultCodec.string());
    assertThat(threadsOf(guard)).as("the guard started threads").isNotEmpty();

    guard.close();

    await(() -> threadsOf(guard).isEmpty(), "the guard's threads to end");
    assertThat(batch.claimedKeys()).hasSize(1);
  }

  @Test
  void callsAfterCloseAreRefusedAndCloseIsIdempotent() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String key = key();
    guard.execute(key, TTL, ctx -> "sent");

    guard.close();
    guard.close();

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "again"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed");
    assertThatThrownBy(() -> guard.executeAsync(key, TTL, ctx -> null))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(
            () -> guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string()))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> guard.find(key)).isInstanceOf(IllegalStateException.class);
  }

  /** What an unrecorded batch reported is written at close, not left to run out. */
  @Test
  void closeWritesWhatAnUnrecordedBatchReported() {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).lease(Duration.ofMinutes(1)).build();
    List<IdempotencyRequest> requests =
        List.of(IdempotencyRequest.of(key(), TTL), IdempotencyRequest.of(key(), TTL));
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    Batch.Item first = batch.toSend().iterator().next();
    batch.succeeded(first, "reported");

    guard.close();
    IdempotencyGuard other = IdempotencyGuard.builder().store(store).build();

    assertThat(other.execute(first.key(), TTL, ctx -> "again")).isEqualTo("reported");
  }

  @Test
  void closeLeavesTheApplicationsExecutorsAlone() throws Exception {
    ExecutorService mine = Executors.newFixedThreadPool(2);
    try {
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(store)
              .asyncExecutor(mine)
              .blockingStoreExecutor(mine)
              .build();
      guard
          .executeAsync(
              key(), TTL, ctx -> java.util.concurrent.CompletableFuture.completedFuture("a"))
          .toCompletableFuture()
          .get(30, TimeUnit.SECONDS);

      guard.close();

      assertThat(mine.isShutdown()).isFalse();
      assertThat(mine.submit(() -> "still works").get(30, TimeUnit.SECONDS))
          .isEqualTo("still works");
    } finally {
      mine.shutdownNow();
    }
  }
}
