package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (issue 37, fixstall x fixclose; probeD): an {@code executeAsync} claim on a blocking store
 * that the store applied though its answer was lost, while the application's async executor (a
 * saturated pool with the default abort policy) refuses the call's next step. The refusal path of
 * {@code Stages.continueOrReject} (AsyncGuardedCall#attempt) releases only a granted claim and
 * never reaches {@code CallSupport.decide}, so the lost claim is not taken back: the key stays
 * {@code IN_PROGRESS} under a token nobody renews, with nothing sent, for a lease (and, in strict
 * mode, answers "outcome unknown" after it). The guard stays open throughout.
 */
class RejectedStepAfterLostClaimTest {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final CountDownLatch claimMayAnswer = new CountDownLatch(1);
  final CountDownLatch poolMayGoOn = new CountDownLatch(1);
  final AtomicInteger claimsAsked = new AtomicInteger();
  final ExecutorService storeThreads = Executors.newFixedThreadPool(1);
  final ThreadPoolExecutor steps =
      new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new SynchronousQueue<>());

  /** A blocking store whose claim waits for the test, is applied, and loses its answer. */
  final ForwardingKeyStore losing =
      new ForwardingKeyStore(memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          claimsAsked.incrementAndGet();
          try {
            claimMayAnswer.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          delegate.claim(request);
          throw new KeyStoreException("the claim's answer was lost", null);
        }
      };

  @AfterEach
  void stop() throws InterruptedException {
    claimMayAnswer.countDown();
    poolMayGoOn.countDown();
    storeThreads.shutdownNow();
    steps.shutdownNow();
    assertThat(storeThreads.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
    assertThat(steps.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  @Test
  void aLostClaimWhoseNextStepIsRefusedIsTakenBack() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(losing)
            .clock(clock)
            .blockingStoreExecutor(storeThreads)
            .asyncExecutor(steps)
            .lease(Duration.ofSeconds(30))
            .build();
    try {
      String key = "rejected-lost:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      CompletableFuture<String> caller =
          guard
              .executeAsync(
                  key, TTL, ctx -> CompletableFuture.completedFuture("s" + sends.incrementAndGet()))
              .toCompletableFuture();
      IdempotencyGuardTest.await(() -> claimsAsked.get() == 1, "the claim to reach the store");
      CountDownLatch poolBusy = new CountDownLatch(1);
      steps.execute(
          () -> {
            poolBusy.countDown();
            try {
              poolMayGoOn.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          });
      assertThat(poolBusy.await(30, TimeUnit.SECONDS)).isTrue(); // the pool now refuses
      claimMayAnswer.countDown();

      assertThatThrownBy(() -> caller.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class);
      assertThat(sends).hasValue(0);
      poolMayGoOn.countDown();

      // a take-back goes at once; the clock stands still, so no lease runs out meanwhile
      Poll.within(Duration.ofSeconds(20))
          .until(
              "the record of a claim whose answer was lost and whose next step was refused to be"
                  + " released (nothing sent; lease 30 s)",
              () -> memory.find(Digests.keyId(key), clock.instant()),
              Optional::isEmpty);
    } finally {
      guard.close();
    }
  }
}
