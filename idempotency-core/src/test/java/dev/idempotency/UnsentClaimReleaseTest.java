package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (probeA's QueuedClaimsAfterCloseProbeTest, in core): an {@code executeAsync} claim on a
 * blocking store that runs, or is answered, after close() gave up on its call, or whose next step
 * an executor refuses, never sends and never leaves its key claimed for a lease: a claim not yet
 * asked is refused without asking the store, and a claim granted then is released at once, fenced,
 * by the thread that holds it. The store is the in-memory one behind a blocking face whose claims
 * wait for the test (a store stalled by a lock).
 */
class UnsentClaimReleaseTest {

  static final Duration TTL = Duration.ofHours(1);

  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final CountDownLatch claimsMayAnswer = new CountDownLatch(1);
  final AtomicInteger claimsAsked = new AtomicInteger();
  final ExecutorService pool = Executors.newCachedThreadPool();

  /** A blocking store (its calls queue on the guard's store-io pool) whose claims stall. */
  final KeyStore stalled =
      new ForwardingKeyStore(memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          claimsAsked.incrementAndGet();
          try {
            claimsMayAnswer.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          return delegate.claim(request);
        }
      };

  @AfterEach
  void stopThreads() throws InterruptedException {
    claimsMayAnswer.countDown();
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  @Test
  void claimsAnsweredOrQueuedWhenCloseGivesUpAreReleasedOrNeverAsked() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(stalled)
            .closeGracePeriod(Duration.ofMillis(100))
            .lease(Duration.ofMinutes(5))
            .build();
    int calls = DefaultExecutors.STORE_IO_THREADS + 4;
    AtomicInteger sends = new AtomicInteger();
    List<String> keys = new ArrayList<>();
    List<CompletableFuture<String>> callers = new ArrayList<>();
    for (int i = 0; i < calls; i++) {
      String key = "unsent:" + UUID.randomUUID();
      keys.add(key);
      callers.add(
          guard
              .executeAsync(
                  key,
                  TTL,
                  ctx -> CompletableFuture.completedFuture("sent-" + sends.incrementAndGet()))
              .toCompletableFuture());
    }
    await(
        () -> claimsAsked.get() == DefaultExecutors.STORE_IO_THREADS,
        "every store-io thread in a claim");

    Future<?> closing = pool.submit(guard::close);
    await(() -> guard.settings().keeper.isClosed(), "close() to give up after its grace period");
    claimsMayAnswer.countDown(); // the stalled claims are granted now, after close() gave up
    closing.get(30, TimeUnit.SECONDS);

    for (CompletableFuture<String> caller : callers) {
      assertThatThrownBy(() -> caller.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .cause()
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("closed before the send")
          .hasMessageContaining("nothing was sent");
    }
    assertThat(sends).as("sends").hasValue(0);
    assertThat(claimsAsked)
        .as("claims asked: the queued ones never were")
        .hasValue(DefaultExecutors.STORE_IO_THREADS);
    for (String key : keys) {
      assertThat(memory.find(Digests.keyId(key), Instant.now()))
          .as("record of a key whose claim close() gave up on")
          .isEmpty();
    }
  }

  @Test
  void aGrantedClaimWhoseNextStepIsRefusedIsReleased() throws Exception {
    ExecutorService storeThreads = Executors.newFixedThreadPool(2);
    ExecutorService steps = Executors.newFixedThreadPool(2);
    try {
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(stalled)
              .blockingStoreExecutor(storeThreads)
              .asyncExecutor(steps)
              .lease(Duration.ofMinutes(5))
              .build();
      String key = "refused-step:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      CompletableFuture<String> caller =
          guard
              .executeAsync(
                  key,
                  TTL,
                  ctx -> CompletableFuture.completedFuture("sent-" + sends.incrementAndGet()))
              .toCompletableFuture();
      await(() -> claimsAsked.get() == 1, "the claim to reach the store");
      steps.shutdown(); // the application stops the executor the call goes on with
      claimsMayAnswer.countDown();

      assertThatThrownBy(() -> caller.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .hasCauseInstanceOf(RejectedExecutionException.class);
      assertThat(sends).hasValue(0);
      assertThat(memory.find(Digests.keyId(key), Instant.now()))
          .as("record of a key granted to a call that could not go on")
          .isEmpty();
      guard.close();
    } finally {
      storeThreads.shutdownNow();
      steps.shutdownNow();
    }
  }
}
