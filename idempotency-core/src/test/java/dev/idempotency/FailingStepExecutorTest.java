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
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * An {@code executeAsync} whose claim answers after the call returned, and whose async executor
 * then fails to take the next step with something other than a refusal (fluxhang's finding, from
 * reading: an {@code OutOfMemoryError: unable to create native thread} while a pool adds a worker).
 * Before the fix, {@code Stages.continueOrReject} caught only {@code RejectedExecutionException}:
 * the error vanished into the claim's completion, the caller's stage never completed and the key
 * stayed claimed with nothing sent. Now such a failure is a refusal: the claim is released and the
 * caller fails with the executor's error as the cause.
 */
class FailingStepExecutorTest {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final CountDownLatch claimMayAnswer = new CountDownLatch(1);
  final AtomicInteger claimsAsked = new AtomicInteger();
  final ExecutorService storeThreads = Executors.newFixedThreadPool(1);

  /** A blocking store whose claim answers only when the test lets it. */
  final ForwardingKeyStore slow =
      new ForwardingKeyStore(memory) {
        @Override
        public ClaimResult claim(ClaimRequest request) {
          claimsAsked.incrementAndGet();
          try {
            claimMayAnswer.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          return delegate.claim(request);
        }
      };

  /** An executor that cannot start a thread. */
  final Executor failing =
      task -> {
        throw new OutOfMemoryError("unable to create native thread (the test's executor)");
      };

  @AfterEach
  void stop() throws InterruptedException {
    claimMayAnswer.countDown();
    storeThreads.shutdownNow();
    assertThat(storeThreads.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  @Test
  void anExecutorThatFailsToTakeTheStepReleasesTheClaimAndFailsTheCaller() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(slow)
            .clock(clock)
            .blockingStoreExecutor(storeThreads)
            .asyncExecutor(failing)
            .lease(Duration.ofSeconds(30))
            .build();
    try {
      String key = "failing-step:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      CompletableFuture<String> caller =
          guard
              .executeAsync(
                  key, TTL, ctx -> CompletableFuture.completedFuture("s" + sends.incrementAndGet()))
              .toCompletableFuture();
      Poll.within(Duration.ofSeconds(20))
          .until("the claim to reach the store", claimsAsked::get, asked -> asked == 1);
      claimMayAnswer.countDown();

      assertThatThrownBy(() -> caller.get(20, TimeUnit.SECONDS))
          .as("the caller's stage completes (it never did: the executor's error was swallowed)")
          .isInstanceOf(ExecutionException.class)
          .hasRootCauseInstanceOf(OutOfMemoryError.class);
      assertThat(sends).hasValue(0);
      Poll.within(Duration.ofSeconds(20))
          .until(
              "the granted claim whose next step the executor failed to take to be released",
              () -> memory.find(Digests.keyId(key), clock.instant()),
              Optional::isEmpty);
    } finally {
      guard.close();
    }
  }
}
