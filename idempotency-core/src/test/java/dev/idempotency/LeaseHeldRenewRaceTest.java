package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The lazy {@link SendContext#leaseHeld()} path of {@code RenewNowRaceProbeTest}: an async sender
 * ({@code executeAsync}) that hands its provider call to another thread checks {@code leaseHeld()}
 * there, which renews a claim with less than the keeper's margin left ({@code
 * LeaseKeeper.readyToSend}, then {@code renewNow}), while the keeper's own renewal of the same
 * claim, sent earlier, is still on its way to the store.
 *
 * <p>In-memory store behind a forwarding store that holds guard A's first keeper renewal (request
 * time T0); the guard's clock moved by hand. Lease 4 s. At T0+3.5 s the sender's task asks {@code
 * leaseHeld()}: the claim has 0.5 s left, less than the 1 s margin, so it is renewed (store and
 * guard: T0+7.5 s). Then the keeper's renewal sent at T0 lands. At T0+5 s guard B claims the key.
 *
 * <p>Before the fix (fixcore) the task's renewal went to the store beside the keeper's, which
 * landed after it and moved the stored lease back to T0+4 s: B took the key over and sent while A's
 * provider call was live ("sends Expected: 1, Actual: 2"). Now renewals of one claim never overlap:
 * {@code leaseHeld()} waits for the keeper's renewal, then renews.
 */
class LeaseHeldRenewRaceTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final AtomicBoolean holdKeeper = new AtomicBoolean(true);
  final CountDownLatch keeperHeld = new CountDownLatch(1);
  final CountDownLatch letFirstGo = new CountDownLatch(1);
  final CountDownLatch firstLanded = new CountDownLatch(1);
  final CountDownLatch letOthersGo = new CountDownLatch(1);
  final AtomicInteger keeperRequests = new AtomicInteger();
  final AtomicBoolean checked = new AtomicBoolean();
  final AtomicBoolean renewedBesideKeeper = new AtomicBoolean();
  final ExecutorService providerThread =
      Executors.newSingleThreadExecutor(r -> new Thread(r, "provider-call"));

  final ForwardingKeyStore slowKeeperPath =
      new ForwardingKeyStore(memory) {
        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (!Thread.currentThread().getName().contains("lease-keeper") || !holdKeeper.get()) {
            if (keeperHeld.getCount() == 0 && firstLanded.getCount() == 1) {
              renewedBesideKeeper.set(true);
            }
            return delegate.extendAll(requests);
          }
          if (keeperRequests.get() >= 1 && !checked.get()) {
            // a later keeper round before the check: passes (it would only delay the check)
            return delegate.extendAll(requests);
          }
          int n = keeperRequests.incrementAndGet();
          if (n == 1) {
            keeperHeld.countDown();
            await(letFirstGo);
            List<Boolean> moved = delegate.extendAll(requests);
            firstLanded.countDown();
            return moved;
          }
          await(letOthersGo); // the keeper's later requests: held until the end of the test
          return delegate.extendAll(requests);
        }
      };

  final IdempotencyGuard guardA =
      IdempotencyGuard.builder()
          .store(slowKeeperPath)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();
  final IdempotencyGuard guardB =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    holdKeeper.set(false);
    letFirstGo.countDown();
    letOthersGo.countDown();
    providerThread.shutdownNow();
    guardA.close();
    guardB.close();
  }

  @Test
  void aLeaseHeldCheckThatRenewsWaitsForTheKeepersOlderRenewal() throws Exception {
    String key = "lease-held-race:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    AtomicReference<SendContext> context = new AtomicReference<>();
    CompletableFuture<String> providerCall = new CompletableFuture<>();
    CompletableFuture<String> a =
        guardA
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  context.set(ctx);
                  return providerCall; // A's sender hands the provider call on
                })
            .toCompletableFuture();
    assertThat(keeperHeld.await(30, TimeUnit.SECONDS))
        .as("the keeper sent its renewal (request time T0)")
        .isTrue();

    time.advance(Duration.ofMillis(3_500)); // 0.5 s left: leaseHeld() renews first
    AtomicReference<Thread> checking = new AtomicReference<>();
    Future<Boolean> held =
        providerThread.submit(
            () -> {
              checking.set(Thread.currentThread());
              boolean answer = context.get().leaseHeld();
              checked.set(true);
              return answer;
            });
    Poll.within(Duration.ofSeconds(60))
        .until(
            "the check done, or waiting",
            () ->
                held.isDone()
                    || (checking.get() != null
                        && checking.get().getState() == Thread.State.WAITING));
    letFirstGo.countDown(); // the keeper's renewal sent at T0 lands now
    assertThat(firstLanded.await(30, TimeUnit.SECONDS)).isTrue();
    assertThat(held.get(60, TimeUnit.SECONDS)).as("lease held at T0+3.5 s").isTrue();
    sends.incrementAndGet(); // A's provider call starts (it runs until providerCall completes)

    time.advance(Duration.ofMillis(1_500)); // T0+5 s: A renewed at T0+3.5 s
    String b;
    try {
      b = guardB.execute(key, TTL, other -> "b-" + sends.incrementAndGet());
    } catch (IdempotencyInProgressException inProgress) {
      b = "in progress";
    }
    holdKeeper.set(false);
    letOthersGo.countDown();
    providerCall.complete("a-sent");
    String outcomeOfA;
    try {
      outcomeOfA = a.get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      outcomeOfA = e.getCause().toString();
    }

    assertThat(sends)
        .as(
            "sends (A renewed at T0+3.5 s, believing its lease ends at T0+7.5 s; B got: %s;"
                + " A got: %s)",
            b, outcomeOfA)
        .hasValue(1);
    assertThat(outcomeOfA).isEqualTo("a-sent");
    assertThat(renewedBesideKeeper)
        .as("leaseHeld() renewed while the keeper's older renewal was on its way")
        .isFalse();
  }

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
