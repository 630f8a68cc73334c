package dev.idempotency;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Claims the guard gave up on with nothing sent, taken back in the background (issue 37). A claim
 * that failed after it reached the store (its operation timeout passed while the store stalled, or
 * the answer of a committed write was lost) may still be applied by the store once it goes on: the
 * key would then be {@code IN_PROGRESS} under a token nobody renews, so retries would get "in
 * progress" for a lease and, in strict mode, "outcome unknown" for the rest of the window, though
 * nothing was ever sent. The guard knows the token and that nothing was sent, so it deletes that
 * record, fenced by the token ({@link dev.idempotency.spi.KeyStore#release}: only a record still
 * {@code IN_PROGRESS} under that very token, never a later claim of another call):
 *
 * <ol>
 *   <li>at once, then after a store failure again after 50 ms, twice as long each time, at most a
 *       second, until the store answers (whether it held the record or not);
 *   <li>then {@value #FOLLOW_UPS} more times, at 1/16, 1/8, 1/4, 1/2 and one lease after that first
 *       answer (a failed follow-up is tried again with the same backoff), since the stray write can
 *       land after the first release: a request the store had queued on another connection, or a
 *       client that sent its request again.
 * </ol>
 *
 * Nothing happens on a call whose claim was answered, nor on one the breaker refused without asking
 * the store. At most {@link IdempotencyGuard.Builder#maxPendingOutcomes} take-backs wait at once
 * (the breaker keeps them few: once it opens, claims no longer reach the store). A take-back is not
 * a running call: {@link IdempotencyGuard#close()} does not wait for it (a program whose store is
 * down closes at once, as before), and drops what is left, with one WARN if the store never
 * answered some of them (such a key is then held one lease, as after a crash). It shares the thread
 * of {@link PendingOutcomes}. Thread-safe.
 */
final class UnsentClaims {

  /** Follow-up releases after the store first answered, spread over one lease. */
  static final int FOLLOW_UPS = 5;

  /** One claim to take back. Mutable fields are touched only on the writer's thread. */
  private static final class TakeBack {
    final String keyId;
    final String ownerToken;

    /** 0 until the store first answered, then the follow-ups done. */
    int followUps;

    /** Store failures in a row. */
    int failures;

    /** When the store first answered ({@link System#nanoTime()}). */
    long firstAnsweredMono;

    TakeBack(String keyId, String ownerToken) {
      this.keyId = keyId;
      this.ownerToken = ownerToken;
    }
  }

  private final GuardSettings settings;
  private final int limit;
  private final ScheduledExecutorService thread;
  private final AtomicInteger size = new AtomicInteger();

  /** The take-backs whose store has not answered yet. */
  private final Set<TakeBack> unanswered = ConcurrentHashMap.newKeySet();

  private volatile boolean closed;

  UnsentClaims(GuardSettings settings, int limit, ScheduledExecutorService thread) {
    this.settings = settings;
    this.limit = limit;
    this.thread = thread;
  }

  /**
   * A claim that reached the store failed, and nothing was or will be sent under it: takes it back
   * in the background, if there is room.
   */
  void takeBack(String keyId, String ownerToken) {
    if (limit == 0 || closed) {
      return;
    }
    if (size.incrementAndGet() > limit) {
      size.decrementAndGet();
      CallEvents.log.debug(
          "Too many claims to take back; key {} may stay claimed for a lease", keyId);
      return;
    }
    TakeBack takeBack = new TakeBack(keyId, ownerToken);
    unanswered.add(takeBack);
    schedule(takeBack, 0);
  }

  private void schedule(TakeBack takeBack, long delayNanos) {
    if (closed) {
      end(takeBack);
      return;
    }
    try {
      thread.schedule(() -> attempt(takeBack), delayNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      end(takeBack);
    }
  }

  /** On the writer's thread: one fenced release, and what follows it. */
  private void attempt(TakeBack takeBack) {
    if (closed) {
      end(takeBack);
      return;
    }
    boolean released;
    try {
      released = settings.store.release(takeBack.keyId, takeBack.ownerToken);
    } catch (RuntimeException e) {
      takeBack.failures++;
      CallEvents.log.debug(
          "Taking back the claim of key {} failed; trying again", takeBack.keyId, e);
      schedule(
          takeBack,
          TimeUnit.MILLISECONDS.toNanos(CallSupport.completionBackoffMillis(takeBack.failures)));
      return;
    }
    takeBack.failures = 0;
    if (released) {
      CallEvents.log.debug(
          "Took back the claim of key {}, written after the guard gave up on it (nothing sent)",
          takeBack.keyId);
    }
    long now = System.nanoTime();
    if (takeBack.followUps == 0) {
      takeBack.firstAnsweredMono = now;
      unanswered.remove(takeBack);
    }
    takeBack.followUps++;
    if (takeBack.followUps > FOLLOW_UPS) {
      end(takeBack);
      return;
    }
    long due =
        takeBack.firstAnsweredMono + (settings.leaseNanos >> (FOLLOW_UPS - takeBack.followUps));
    schedule(takeBack, Math.max(0, due - now));
  }

  private void end(TakeBack takeBack) {
    unanswered.remove(takeBack);
    size.decrementAndGet();
  }

  /**
   * The guard is closing: drops what is left (the thread is shut down by {@link
   * PendingOutcomes#close()}), with one WARN if the store never answered some of them.
   */
  void close() {
    closed = true;
    int dropped = unanswered.size();
    unanswered.clear();
    if (dropped > 0) {
      CallEvents.log.warn(
          "Closed the idempotency guard with {} claims not taken back (they failed while the store"
              + " did not answer, and nothing was sent for them): if the store applied them late,"
              + " their keys stay claimed until their leases end",
          dropped);
    }
  }
}
