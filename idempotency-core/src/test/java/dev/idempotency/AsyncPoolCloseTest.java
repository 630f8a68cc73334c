package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Regression test of probe42h's finding (hang39's LinkedTransferQueue pools, SPEC 14): {@code
 * close()} lets running calls finish within its grace; what outlives it is abandoned "as a crash
 * would be", and a call's continuation that the guard's own executor refuses after close reaches
 * its caller as an {@code IllegalStateException} (AsyncGuardedCall.abandonedIfRejected). This probe
 * fills the guard's own async pool ({@link DefaultExecutors#ASYNC_THREADS} threads) with calls
 * whose result codec is slow (a codec that calls a key service, say), so one more call's
 * continuation waits in the pool's queue when close() runs. After the grace and the executors'
 * bound, {@code DefaultExecutors.shutdown} calls {@code shutdownNow()}, which drops the queued task
 * without running or rejecting it: that caller's stage never completed (a caller joining it hung).
 * Now close() completes every stage it gave up on with the {@code IllegalStateException} that names
 * it, and leaves the keys as a crash would: claimed, neither released nor sent again.
 */
class AsyncPoolCloseTest {

  static final Duration TTL = Duration.ofHours(1);

  @Test
  void everyCallerLearnsItsCallsEndWhenCloseAbandonsQueuedWork() throws Exception {
    InMemoryKeyStore store = InMemoryKeyStore.builder().build();
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).closeGracePeriod(Duration.ofMillis(200)).build();
    CountDownLatch codecMayReturn = new CountDownLatch(1);
    AtomicInteger encodesStarted = new AtomicInteger();
    ResultCodec<String> slowCodec =
        new ResultCodec<>() {
          @Override
          public byte[] encode(String value) {
            encodesStarted.incrementAndGet();
            boolean released = false;
            while (!released) {
              try {
                released = codecMayReturn.await(60, TimeUnit.SECONDS);
                break;
              } catch (InterruptedException interrupted) {
                // shutdownNow interrupts: the slow remote call goes on regardless
              }
            }
            return value.getBytes(StandardCharsets.UTF_8);
          }

          @Override
          public String decode(byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
          }
        };
    int calls = DefaultExecutors.ASYNC_THREADS + 1;
    List<CompletableFuture<String>> providers = new ArrayList<>();
    List<CompletableFuture<String>> callers = new ArrayList<>();
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < calls; i++) {
      CompletableFuture<String> provider = new CompletableFuture<>();
      providers.add(provider);
      keys.add("probe42h:" + UUID.randomUUID());
      callers.add(
          guard.executeAsync(keys.get(i), TTL, slowCodec, ctx -> provider).toCompletableFuture());
    }
    providers.forEach(provider -> provider.complete("sent"));
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(10))
        .until(
            "every pool thread to be busy in the codec",
            () -> encodesStarted.get() >= DefaultExecutors.ASYNC_THREADS);
    assertThat(encodesStarted).as("every pool thread busy in the codec").hasValue(calls - 1);

    try {
      guard.close(); // grace 200 ms, then the executors' bound (10 s), then shutdownNow
    } finally {
      codecMayReturn.countDown();
    }

    Poll.within(Duration.ofSeconds(10))
        .until(
            "every caller's stage to complete after close() returned",
            () -> callers.stream().filter(c -> !c.isDone()).count(),
            notDone -> notDone == 0);
    for (CompletableFuture<String> caller : callers) {
      assertThatThrownBy(caller::join)
          .hasCauseInstanceOf(IllegalStateException.class)
          .cause()
          .hasMessageContaining("was closed before this call");
    }

    // their keys are left as after a crash: still claimed (or recorded), never released
    AtomicInteger secondSends = new AtomicInteger();
    try (IdempotencyGuard second =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build()) {
      for (String key : keys) {
        try {
          second.execute(key, TTL, ctx -> "sent twice " + secondSends.incrementAndGet());
        } catch (IdempotencyInProgressException stillClaimed) {
          // the abandoned claim holds its key until its lease runs out
        }
      }
    }
    assertThat(secondSends).as("keys sent again right after close() gave up on them").hasValue(0);
  }
}
