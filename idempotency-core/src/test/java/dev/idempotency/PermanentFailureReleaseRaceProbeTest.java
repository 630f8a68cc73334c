package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeR: a permanent failure whose FAILED write was handed to {@link PendingOutcomes} must not be
 * erased by a release of the same claim (SPEC 5/6: a repeat gets the stored failure, the sender is
 * not called again). The store is the in-memory store behind a forwarding store; the order of the
 * two background writes is fixed by holding the FAILED write ({@code complete}) until a release has
 * been answered, or {@link #HOLD_AT_MOST} has passed, or no release can come: the caller was
 * answered {@link #QUIET} ago and the guard attempted no release (both paths attempt their direct
 * release before they answer the caller, and only a failed attempt goes to the background). So a
 * guard that sends no release at all still writes its failure and passes, without waiting out
 * {@link #HOLD_AT_MOST}.
 */
class PermanentFailureReleaseRaceProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  /** How long the FAILED write is held at most, waiting for a release to be answered. */
  static final long HOLD_AT_MOST = TimeUnit.SECONDS.toNanos(10);

  /** How long after the caller's answer, no release attempted, the FAILED write is still held. */
  static final long QUIET = TimeUnit.MILLISECONDS.toNanos(500);

  /** Releases fail while set (the store "down" for releases). */
  final AtomicBoolean releasesDown = new AtomicBoolean();

  /** Outcome writes fail while set, until a release was answered or {@link #HOLD_AT_MOST}. */
  final AtomicBoolean holdWrites = new AtomicBoolean();

  final AtomicLong holdSinceMono = new AtomicLong();
  final AtomicInteger releasesAnswered = new AtomicInteger();
  final AtomicInteger releasesAttempted = new AtomicInteger();

  /** When the first call's caller got its answer ({@link System#nanoTime()}); 0 until then. */
  final AtomicLong answeredMono = new AtomicLong();

  final AtomicInteger writesAnswered = new AtomicInteger();

  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public boolean complete(CompleteRequest request) {
          if (holdWrites.get()) {
            long since = holdSinceMono.get();
            boolean holding =
                releasesAnswered.get() == 0
                    && (since == 0 || System.nanoTime() - since < HOLD_AT_MOST)
                    && !noReleaseComing();
            if (holding) {
              throw new KeyStoreException("the store is down (write held)", null);
            }
          }
          boolean written = delegate.complete(request);
          writesAnswered.incrementAndGet();
          return written;
        }

        @Override
        public boolean release(String keyId, String ownerToken) {
          releasesAttempted.incrementAndGet();
          if (releasesDown.get()) {
            throw new KeyStoreException("the store is down (release)", null);
          }
          boolean released = delegate.release(keyId, ownerToken);
          releasesAnswered.incrementAndGet();
          return released;
        }
      };

  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .lease(Duration.ofMinutes(2))
          .completionAttempts(1)
          .failureClassifier(failure -> failure instanceof IllegalArgumentException)
          .build();

  /** The caller was answered a while ago, and the guard attempted no release before that. */
  private boolean noReleaseComing() {
    long answered = answeredMono.get();
    return answered != 0 && releasesAttempted.get() == 0 && System.nanoTime() - answered >= QUIET;
  }

  @AfterEach
  void close() {
    guard.close();
  }

  /**
   * Blocking path: the FAILED write and the direct release both fail (store down), so the failure
   * goes to PendingOutcomes and the release to UnsentClaims. 17c2e84 skips the background release
   * when the outcome is pending, but only in AsyncGuardedCall: GuardedCall.onSendFailure still
   * calls unsentClaims.release unconditionally. Once the store is back, a background release
   * answered before the FAILED write deletes the record, and a repeat runs the sender again.
   */
  @Test
  void blockingPermanentFailureIsNotErasedByABackgroundRelease() throws Exception {
    String key = "probe-blocking-bg:" + UUID.randomUUID();
    AtomicInteger calls = new AtomicInteger();
    holdWrites.set(true);
    releasesDown.set(true);
    assertThatThrownBy(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      calls.incrementAndGet();
                      throw new IllegalArgumentException("invalid phone number");
                    }))
        .isInstanceOf(IllegalArgumentException.class);
    answeredMono.set(System.nanoTime());
    holdSinceMono.set(System.nanoTime());
    releasesDown.set(false); // the store is back: which background write lands first?

    assertRepeatGetsTheStoredFailure(key, calls);
  }

  /**
   * Blocking path, the store answering releases but not outcome writes (a flapping store, or one
   * whose writes time out): the FAILED write is handed to PendingOutcomes, then onSendFailure falls
   * through to the direct release, which deletes the record the background is about to mark FAILED.
   */
  @Test
  void blockingPermanentFailureIsNotErasedByTheDirectRelease() throws Exception {
    String key = "probe-blocking-direct:" + UUID.randomUUID();
    AtomicInteger calls = new AtomicInteger();
    holdWrites.set(true);
    holdSinceMono.set(System.nanoTime());
    assertThatThrownBy(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      calls.incrementAndGet();
                      throw new IllegalArgumentException("invalid phone number");
                    }))
        .isInstanceOf(IllegalArgumentException.class);
    answeredMono.set(System.nanoTime());

    assertRepeatGetsTheStoredFailure(key, calls);
  }

  /** The async path of the case above: its direct release is not guarded by outcomePending. */
  @Test
  void asyncPermanentFailureIsNotErasedByTheDirectRelease() throws Exception {
    String key = "probe-async-direct:" + UUID.randomUUID();
    AtomicInteger calls = new AtomicInteger();
    holdWrites.set(true);
    holdSinceMono.set(System.nanoTime());
    CompletableFuture<String> first =
        guard
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  calls.incrementAndGet();
                  return CompletableFuture.failedFuture(
                      new IllegalArgumentException("invalid phone number"));
                })
            .toCompletableFuture();
    assertThatThrownBy(() -> first.get(30, TimeUnit.SECONDS))
        .hasCauseInstanceOf(IllegalArgumentException.class);
    answeredMono.set(System.nanoTime());

    assertRepeatGetsTheStoredFailure(key, calls);
  }

  private void assertRepeatGetsTheStoredFailure(String key, AtomicInteger calls)
      throws InterruptedException {
    Poll.within(Duration.ofSeconds(60))
        .until("the background FAILED write answered", writesAnswered::get, n -> n > 0);
    Optional<RecordState> after = guard.find(key).map(r -> r.state());
    Throwable repeat =
        catchThrowable(() -> guard.execute(key, TTL, ctx -> "sent-" + calls.incrementAndGet()));
    assertThat(calls)
        .as(
            "sender calls (record after the background FAILED write: %s; releases answered: %s)",
            after, releasesAnswered)
        .hasValue(1);
    assertThat(repeat).isInstanceOf(IdempotencyStoredFailureException.class);
    assertThat(calls).as("sender calls").hasValue(1);
  }
}
