package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The fixture of the tests in which an {@code executeAsync} claim on a blocking store answers only
 * after the call returned, and the call's next step then goes wrong on the application's async
 * executor: an in-memory store behind a one-thread store pool, whose claims a test's store holds
 * with {@link #holdClaim()} until {@link #letClaimAnswer()}, a clock that stands still (so no lease
 * runs out meanwhile), and a one-thread pool with the default abort policy that {@link
 * #fillSteps()} saturates.
 */
final class HeldClaimFixture {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final ExecutorService storeThreads = Executors.newFixedThreadPool(1);
  final ThreadPoolExecutor steps =
      new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new SynchronousQueue<>());
  final AtomicInteger sends = new AtomicInteger();
  private final CountDownLatch claimMayAnswer = new CountDownLatch(1);
  private final CountDownLatch stepsMayGoOn = new CountDownLatch(1);
  private final AtomicInteger claimsAsked = new AtomicInteger();

  /** Called by a test's store in its {@code claim}: counts it, then waits for the test's go. */
  void holdClaim() {
    claimsAsked.incrementAndGet();
    try {
      claimMayAnswer.await(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** A guard over {@code store} (which wraps {@link #memory}) with a 30 s lease. */
  IdempotencyGuard guard(KeyStore store, Executor asyncExecutor) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .blockingStoreExecutor(storeThreads)
        .asyncExecutor(asyncExecutor)
        .lease(Duration.ofSeconds(30))
        .build();
  }

  /** Starts a call whose send counts in {@link #sends}, and waits for its claim to be held. */
  CompletableFuture<String> callHeldAtItsClaim(IdempotencyGuard guard, String key)
      throws InterruptedException {
    CompletableFuture<String> caller =
        guard
            .executeAsync(
                key, TTL, ctx -> CompletableFuture.completedFuture("s" + sends.incrementAndGet()))
            .toCompletableFuture();
    Poll.within(Duration.ofSeconds(20))
        .until("the claim to reach the store", claimsAsked::get, asked -> asked == 1);
    return caller;
  }

  void letClaimAnswer() {
    claimMayAnswer.countDown();
  }

  /** Occupies {@link #steps}' one thread until {@link #letStepsGoOn()}: the pool now refuses. */
  void fillSteps() throws InterruptedException {
    CountDownLatch busy = new CountDownLatch(1);
    steps.execute(
        () -> {
          busy.countDown();
          try {
            stepsMayGoOn.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
    assertThat(busy.await(30, TimeUnit.SECONDS)).isTrue();
  }

  void letStepsGoOn() {
    stepsMayGoOn.countDown();
  }

  /** Waits until the key's record is gone from the in-memory store. */
  void awaitReleased(String key, String what) throws InterruptedException {
    Poll.within(Duration.ofSeconds(20))
        .until(what, () -> memory.find(Digests.keyId(key), clock.instant()), Optional::isEmpty);
  }

  static String newKey(String prefix) {
    return prefix + ":" + UUID.randomUUID();
  }

  /** Lets every held thread go and stops both pools. */
  void stop() throws InterruptedException {
    letClaimAnswer();
    letStepsGoOn();
    storeThreads.shutdownNow();
    steps.shutdownNow();
    assertThat(storeThreads.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
    assertThat(steps.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }
}
