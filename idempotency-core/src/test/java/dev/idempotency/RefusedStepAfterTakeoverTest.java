package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37, the {@code SendLease.releaseUnsent} path on a non-blocking store ({@code
 * AsyncKeyStore.takeBackAsync}): an {@code executeAsync} takeover of a lapsed lease that the store
 * granted, whose step towards the send the application's async executor refuses (saturated, abort
 * policy), is given back with a take-back, not a release: the record keeps attempt 2 with its lease
 * passed (the first owner may still be sending), and the next caller takes over as attempt 3.
 */
class RefusedStepAfterTakeoverTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final ExecutorService storeThread = Executors.newSingleThreadExecutor();
  final CountDownLatch claimMayAnswer = new CountDownLatch(1);

  /**
   * The in-memory store as a non-blocking one whose claims answer on a thread of their own (as
   * Lettuce's do), so that the step after a claim is handed to the guard's async executor.
   */
  final class AnsweringElsewhere extends ForwardingKeyStore implements AsyncKeyStore {
    AnsweringElsewhere() {
      super(memory);
    }

    @Override
    public CompletionStage<ClaimResult> claimAsync(ClaimRequest request) {
      return CompletableFuture.supplyAsync(
          () -> {
            try {
              assertThat(claimMayAnswer.await(30, TimeUnit.SECONDS)).isTrue();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            return memory.claim(request);
          },
          storeThread);
    }

    @Override
    public CompletionStage<Boolean> completeAsync(CompleteRequest request) {
      return memory.completeAsync(request);
    }

    @Override
    public CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken) {
      return memory.releaseAsync(keyId, ownerToken);
    }

    @Override
    public CompletionStage<Boolean> takeBackAsync(String keyId, String ownerToken, Instant now) {
      return memory.takeBackAsync(keyId, ownerToken, now);
    }
  }

  final CountDownLatch poolMayGoOn = new CountDownLatch(1);
  final ThreadPoolExecutor steps =
      new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new SynchronousQueue<>());

  @AfterEach
  void stop() throws InterruptedException {
    poolMayGoOn.countDown();
    claimMayAnswer.countDown();
    steps.shutdownNow();
    storeThread.shutdownNow();
    assertThat(steps.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
    assertThat(storeThread.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  IdempotencyGuard.Builder guard(KeyStore store) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .leaseRenewal(false)
        .inFlightWait(Duration.ZERO)
        .closeGracePeriod(Duration.ofSeconds(5));
  }

  @Test
  void aTakeoverWhoseStepWasRefusedKeepsItsAttemptForTheNextCaller() throws Exception {
    CountDownLatch ownerMayFinish = new CountDownLatch(1);
    try (IdempotencyGuard owner = guard(memory).build();
        IdempotencyGuard refusing = guard(new AnsweringElsewhere()).asyncExecutor(steps).build()) {
      String key = "refused-takeover:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      CompletableFuture<String> first =
          StalledOwners.sending(owner, key, TTL, sends, ownerMayFinish);
      clock.advance(LEASE.plusSeconds(1)); // the owner stalled past its lease
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

      CompletableFuture<String> retry =
          refusing
              .executeAsync(
                  key,
                  TTL,
                  ctx -> CompletableFuture.completedFuture("retry-" + sends.incrementAndGet()))
              .toCompletableFuture();
      claimMayAnswer.countDown(); // answered on the store's thread: the next step is handed off
      assertThatThrownBy(() -> retry.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .hasCauseInstanceOf(RejectedExecutionException.class);
      String keyId = Digests.keyId(key);
      IdempotencyGuardTest.await(
          () ->
              memory
                  .find(keyId, clock.instant())
                  .map(r -> !r.leaseDeadline().isAfter(clock.instant()))
                  .orElse(true),
          "the take-back of the refused claim");
      Optional<StoredRecord> left = memory.find(keyId, clock.instant());

      AtomicInteger nextAttempt = new AtomicInteger();
      String next =
          owner.execute(
              key,
              TTL,
              ctx -> {
                nextAttempt.set(ctx.attempt());
                return "next-" + sends.incrementAndGet();
              });
      ownerMayFinish.countDown();
      first.get(30, TimeUnit.SECONDS);

      assertThat(left).as("the taken-over record after the refused step").isPresent();
      assertThat(left.get().state()).isEqualTo(RecordState.IN_PROGRESS);
      assertThat(left.get().attempt()).isEqualTo(2);
      assertThat(nextAttempt)
          .as("attempt() of the next send (SPEC 9: counts takeovers)")
          .hasValue(3);
      assertThat(next).isEqualTo("next-2");
    } finally {
      ownerMayFinish.countDown();
    }
  }
}
