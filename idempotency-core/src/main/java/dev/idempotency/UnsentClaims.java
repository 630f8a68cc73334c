package dev.idempotency;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Claims the guard gave up on with nothing sent, taken back in the background (issue 37). A claim
 * that failed after it reached the store (its operation timeout passed while the store stalled, or
 * the answer of a committed write was lost) may still be applied by the store once it goes on: the
 * key would then be {@code IN_PROGRESS} under a token nobody renews, so retries would get "in
 * progress" for a lease and, in strict mode, "outcome unknown" for the rest of the window, though
 * nothing was ever sent. The guard knows the token and that nothing was sent, so it takes that
 * claim back, fenced by the token ({@link dev.idempotency.spi.KeyStore#takeBack}: only a record
 * still {@code IN_PROGRESS} under that very token, never a later claim of another call). The store
 * is then as if the claim had lapsed: a first attempt is deleted; a takeover keeps its attempt with
 * its lease cut to now under a token no caller holds (so no late renewal revives it), so the next
 * caller takes over at once (the owner before it may still be sending), and never claims afresh as
 * attempt 1:
 *
 * <ol>
 *   <li>at once, then after a store failure again after 50 ms, twice as long each time, at most a
 *       second (an eighth of the lease if that is shorter), until the store answers (whether it
 *       held the record or not); after the first attempt, while the guard's breaker is open (the
 *       store known to fail, its probe not yet answered), it waits the same pauses without asking
 *       the store. The first attempt goes at once even so: to a stalled Redis it is queued on the
 *       same connection right behind the claim, so Redis runs it just after the claim;
 *   <li>then {@value #FOLLOW_UPS} more times, at 1/16, 1/8, 1/4, 1/2 and one lease after that first
 *       answer (a failed follow-up is tried again with the same backoff), since the stray write can
 *       land after the first release: a request the store had queued on another connection, or a
 *       client that sent its request again.
 * </ol>
 *
 * Nothing happens on a call whose claim was answered, nor on one the breaker refused without asking
 * the store.
 *
 * <p>The release of a failed send's claim that failed ({@link #release}: the sender threw, and the
 * store did not answer the guard's fenced release) is tried again here the same way, as a fenced
 * release instead of a take-back: otherwise the key stays {@code IN_PROGRESS} for the rest of its
 * lease once the store answers again (a stalled Redis does not run a release it answers {@code
 * NOSCRIPT} to after the guard gave up on it), though nothing is being sent under it. At most
 * {@link IdempotencyGuard.Builder#maxPendingOutcomes} take-backs wait at once (the breaker keeps
 * them few: once it opens, claims no longer reach the store). A take-back is not a running call:
 * {@link IdempotencyGuard#close()} does not wait for it (a program whose store is down closes at
 * once, as before), and drops what is left, with one WARN if the store never answered some of them
 * (such a key is then held one lease, as after a crash). It runs on a thread of its own (created
 * when a claim is first taken back, gone after 30 s idle), so that releases to a slow store never
 * hold up {@link PendingOutcomes}' writes of sent outcomes. Thread-safe.
 */
final class UnsentClaims {

  /** Follow-up releases after the store first answered, spread over one lease. */
  static final int FOLLOW_UPS = 5;

  /** One claim to take back. Mutable fields are touched only on the writer's thread. */
  private static final class TakeBack {
    final String keyId;
    final String ownerToken;

    /** A fenced release of a failed send's claim, rather than a take-back. */
    final boolean release;

    /** 0 until the store first answered, then the follow-ups done. */
    int followUps;

    /** Store failures in a row. */
    int failures;

    /** When the store first answered ({@link System#nanoTime()}). */
    long firstAnsweredMono;

    TakeBack(String keyId, String ownerToken, boolean release) {
      this.keyId = keyId;
      this.ownerToken = ownerToken;
      this.release = release;
    }
  }

  private final GuardSettings settings;
  private final int limit;

  /** Its own thread, so that a slow store's releases never hold up the outcome writes. */
  private final ScheduledThreadPoolExecutor thread;

  /** The longest pause between attempts: a second, or an eighth of the lease if that is shorter. */
  private final long maxPauseNanos;

  private final AtomicInteger size = new AtomicInteger();

  /** The take-backs whose store has not answered yet. */
  private final Set<TakeBack> unanswered = ConcurrentHashMap.newKeySet();

  private volatile boolean closed;

  UnsentClaims(GuardSettings settings, int limit) {
    this.settings = settings;
    this.limit = limit;
    this.maxPauseNanos =
        Math.max(
            TimeUnit.MILLISECONDS.toNanos(CallSupport.COMPLETION_BACKOFF_MILLIS),
            Math.min(
                TimeUnit.MILLISECONDS.toNanos(CallSupport.MAX_COMPLETION_BACKOFF_MILLIS),
                settings.leaseNanos / 8));
    // no thread until a claim is taken back; it ends after 30 s idle
    this.thread =
        new ScheduledThreadPoolExecutor(
            1, DefaultExecutors.daemonThreads(settings.executors.threadPrefix + "claim-taker"));
    thread.setKeepAliveTime(30, TimeUnit.SECONDS);
    thread.allowCoreThreadTimeOut(true);
    thread.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
  }

  /**
   * A claim that reached the store failed, and nothing was or will be sent under it: takes it back
   * in the background, if there is room.
   */
  void takeBack(String keyId, String ownerToken) {
    add(keyId, ownerToken, false);
  }

  /**
   * The fenced release of a claim whose send failed (the claim is released so that a retry sends
   * again, SPEC 6) failed itself: releases it in the background, if there is room. Not for a call
   * whose permanent failure {@link PendingOutcomes} is writing: the release would race that write.
   */
  void release(String keyId, String ownerToken) {
    add(keyId, ownerToken, true);
  }

  private void add(String keyId, String ownerToken, boolean release) {
    if (limit == 0 || closed) {
      return;
    }
    if (size.incrementAndGet() > limit) {
      size.decrementAndGet();
      CallEvents.log.debug(
          "Too many claims to take back; key {} may stay claimed for a lease", keyId);
      return;
    }
    TakeBack takeBack = new TakeBack(keyId, ownerToken, release);
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

  /** On the writer's thread: one fenced take-back, and what follows it. */
  private void attempt(TakeBack takeBack) {
    if (closed) {
      end(takeBack);
      return;
    }
    if (takeBack.failures > 0 && settings.outages.knownFailing()) {
      schedule(takeBack, pause(++takeBack.failures)); // the guard's probe is on it
      return;
    }
    boolean released;
    try {
      released =
          takeBack.release
              ? settings.store.release(takeBack.keyId, takeBack.ownerToken)
              : settings.store.takeBack(
                  takeBack.keyId, takeBack.ownerToken, settings.clock.instant());
    } catch (RuntimeException e) {
      CallEvents.log.debug(
          "Taking back the claim of key {} failed; trying again", takeBack.keyId, e);
      schedule(takeBack, pause(++takeBack.failures));
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

  /** The pause before attempt {@code failures + 1}: doubling from 50 ms, at most maxPauseNanos. */
  private long pause(int failures) {
    return Math.min(
        maxPauseNanos,
        TimeUnit.MILLISECONDS.toNanos(
            CallSupport.COMPLETION_BACKOFF_MILLIS << Math.min(failures - 1, 20)));
  }

  private void end(TakeBack takeBack) {
    unanswered.remove(takeBack);
    size.decrementAndGet();
  }

  /**
   * The guard is closing: stops the thread and drops what is left, with one WARN if the store never
   * answered some of them.
   */
  void close() {
    closed = true;
    thread.shutdownNow();
    int dropped = unanswered.size();
    unanswered.clear();
    if (dropped > 0) {
      CallEvents.log.warn(
          "Closed the idempotency guard with {} claims not taken back or released (they, or the"
              + " release of a failed send, failed while the store did not answer): their keys may"
              + " stay claimed until their leases end",
          dropped);
    }
  }
}
