package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (probeA's finding, SPEC 14 and 16): a program that closes its guard once its last async
 * call has completed, in a callback of the stage that call returned ({@code guard.executeAsync(..)
 * .thenRun(guard::close)}), is not calling close() from inside a sender: the call is over, its
 * caller has its value. Yet when the provider answers on a thread of its own, the stage completes
 * on the guard's own async thread and its callbacks run there; close() then waits {@code
 * CLOSE_TIMEOUT} (10 s) for the async pool to terminate, which it cannot while its thread is the
 * one closing, and then interrupts that thread ({@code shutdownNow}): the application's callback
 * goes on with an interrupt it never asked for. Now close() does not wait for the pool whose thread
 * calls it, nor interrupt that thread.
 */
class CloseFromCallbackTest {

  static final Duration TTL = Duration.ofHours(1);

  @Test
  void closeInACallbackOfTheLastCallsStageReturnsPromptly() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(InMemoryKeyStore.builder().build())
            .closeGracePeriod(Duration.ofSeconds(3))
            .build();
    CompletableFuture<String> provider = new CompletableFuture<>();
    java.util.concurrent.atomic.AtomicBoolean interrupted =
        new java.util.concurrent.atomic.AtomicBoolean();
    CompletableFuture<Long> closeMillis =
        guard
            .executeAsync("callback-close:" + System.nanoTime(), TTL, ctx -> provider)
            .toCompletableFuture()
            .thenApply(
                value -> {
                  long start = System.nanoTime();
                  guard.close();
                  interrupted.set(Thread.currentThread().isInterrupted());
                  return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                });
    provider.complete("n_1"); // the provider's own thread answers (here the test's)

    long millis = closeMillis.get(60, TimeUnit.SECONDS);
    org.assertj.core.api.SoftAssertions.assertSoftly(
        softly -> {
          softly
              .assertThat(millis)
              .as("close() in a callback of a call that had completed, in ms")
              .isLessThan(1000);
          softly
              .assertThat(interrupted)
              .as("the callback's thread interrupted by close()")
              .isFalse();
        });
  }
}
