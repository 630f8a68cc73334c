package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1: once {@link SendContext#leaseHeld()} has answered {@code
 * false} to a call of {@code execute}, the guard takes that call as not sent, however the sender
 * ends (its result discarded, the key taken back, a {@link KeyStoreException} to the caller). Can
 * the same context answer {@code true} afterwards, so that a sender that asks again (two layers
 * each checking, or a task re-queued once and checking again) sends, and the guard still takes the
 * key back and the retry sends a second time?
 *
 * <p>The way to a {@code false} that does not lose the claim: the renewal {@code leaseHeld()} makes
 * succeeds, but its answer comes late (the store answers after 3.5 s of a 4 s lease, by the guard's
 * clock, moved by hand inside the store call), so less than the margin (a quarter lease) is left.
 * The claim is not lost, so the next check renews again, quickly, and answers {@code true}. In
 * memory; the keeper's own renewals fail, so only the checks renew.
 *
 * <p>Fixed: once told not held, {@code leaseHeld()} answers {@code false} for good, without asking
 * the store again ({@code CallSupport.context}). The finding (probeJ, on c49da6b7; severity: second
 * send, low to medium: it needs a sender that asks {@code leaseHeld()} more than once and sends on
 * a later {@code true}). Expected: one send, or a {@code false} that stays {@code false}. Happened,
 * in memory: the two checks answered {@code false/true}, the sender sent, the guard discarded its
 * result and took the key back ("KeyStoreException: ... answered false ... so nothing was sent; ...
 * released for a retry"), and the retry sent again: "[sends within the window (leaseHeld answers
 * false/true; ... retry returned sent-2)] Expecting AtomicInteger(2) to have value: 1"; the same
 * through executeAsync (checks on the provider's own thread). A {@code false} answered without
 * losing the claim (too little lease left after a late but successful renewal) is not sticky
 * ({@code Claim.toldNotHeld} is set, but {@code LeaseKeeper.readyToSend} renews again and answers
 * {@code true}). Would fix: once told not held, {@code leaseHeld()} answers {@code false} for good
 * (mark the claim given up), or the Javadoc says a later answer is meaningless.
 */
class LeaseHeldFalseThenTrueProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean nextRenewalAnswersLate = new AtomicBoolean();
  final KeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public boolean extend(ExtendRequest request) {
          return extendAll(List.of(request)).get(0);
        }

        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          if (Thread.currentThread().getName().contains("lease-keeper")) {
            throw new KeyStoreException("the store did not answer the keeper in time", null);
          }
          List<Boolean> answer = delegate.extendAll(requests);
          if (nextRenewalAnswersLate.getAndSet(false)) {
            clock.advance(Duration.ofMillis(3500)); // renewed, but the answer came late
          }
          return answer;
        }
      };
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  final ExecutorService providerTask = Executors.newSingleThreadExecutor();

  @AfterEach
  void close() {
    providerTask.shutdownNow();
    guard.close();
  }

  @Test
  void aTrueAfterAFalseIsNotFollowedByASecondSend() {
    String key = "probe-lease-held-false-then-true:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    AtomicInteger answers = new AtomicInteger();
    StringBuilder seen = new StringBuilder();

    Throwable first =
        catchThrowable(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      clock.advance(Duration.ofMillis(3500)); // the task waited: renewal due
                      nextRenewalAnswersLate.set(true);
                      boolean atHandOff = ctx.leaseHeld();
                      boolean atProviderCall = ctx.leaseHeld();
                      seen.append(atHandOff).append('/').append(atProviderCall);
                      answers.incrementAndGet();
                      return atProviderCall ? "sent-" + sends.incrementAndGet() : "not sent";
                    }));
    String retry = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(answers).hasValue(1);
    assertThat(sends)
        .as(
            "sends within the window (leaseHeld answers %s; first call threw %s; retry returned %s)",
            seen, first, retry)
        .hasValue(1);
  }

  /** The same through {@code executeAsync}, the checks made on the provider's own thread. */
  @Test
  void aTrueAfterAFalseIsNotFollowedByASecondSendAsync() throws Exception {
    String key = "probe-lease-held-false-then-true-async:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    StringBuilder seen = new StringBuilder();

    Throwable first =
        catchThrowable(
            () ->
                guard
                    .executeAsync(
                        key,
                        TTL,
                        ctx ->
                            CompletableFuture.supplyAsync(
                                () -> {
                                  clock.advance(Duration.ofMillis(3500));
                                  nextRenewalAnswersLate.set(true);
                                  boolean atHandOff = ctx.leaseHeld();
                                  boolean atProviderCall = ctx.leaseHeld();
                                  seen.append(atHandOff).append('/').append(atProviderCall);
                                  return atProviderCall
                                      ? "sent-" + sends.incrementAndGet()
                                      : "not sent";
                                },
                                providerTask))
                    .toCompletableFuture()
                    .get(30, TimeUnit.SECONDS));
    String retry = guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(sends)
        .as(
            "sends within the window (leaseHeld answers %s; first call threw %s; retry returned %s)",
            seen, first, retry)
        .hasValue(1);
  }
}
