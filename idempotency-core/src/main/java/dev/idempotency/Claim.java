package dev.idempotency;

import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * A key this guard owns: its owner token and attempt, and two clocks kept up to date by the {@link
 * LeaseKeeper}:
 *
 * <ul>
 *   <li>the guard's estimate of when its lease ends, on {@link GuardSettings#leaseNow()}'s scale
 *       (the store's time: the guard's clock, or the monotonic clock for a server-time store), for
 *       the checks before a send;
 *   <li>when it was last claimed or renewed, and until when it may be renewed, on the monotonic
 *       clock ({@link System#nanoTime()}), for the keeper's schedule: a step of the wall clock
 *       never drops a claim from renewal.
 * </ul>
 *
 * Thread-safe: the caller's thread and the keeper's read and write it.
 */
final class Claim implements LeaseKeeper.Watched {

  final String keyId;
  final String ownerToken;
  final int attempt;
  private final long leaseNanos;
  private volatile long renewedAtMono;
  private volatile long leaseDeadline;
  private volatile long renewUntilMono = Long.MAX_VALUE;
  private volatile boolean lost;
  private volatile boolean finished;

  /**
   * A renewal of this claim is on its way to the store. Renewals of one claim never overlap: each
   * sets the stored lease from its own request time, so an older one landing after a newer one
   * would move the stored lease back while {@link #renewed} keeps the later estimate. Written under
   * this object's monitor, read without it.
   */
  private volatile boolean renewing;

  /**
   * A claim the store granted.
   *
   * @param claimedAt when the claim was asked for, on the lease scale (the lease runs from no
   *     earlier than that)
   * @param claimedAtMono the same moment on the monotonic clock
   */
  Claim(
      String keyId,
      String ownerToken,
      int attempt,
      long claimedAt,
      long claimedAtMono,
      long leaseNanos) {
    this.keyId = keyId;
    this.ownerToken = ownerToken;
    this.attempt = attempt;
    this.leaseNanos = leaseNanos;
    this.renewedAtMono = claimedAtMono;
    this.leaseDeadline = claimedAt + leaseNanos;
  }

  /** Renew this claim until {@code untilMono} at the latest (the renewal limit of a send). */
  void renewUntil(long untilMono) {
    this.renewUntilMono = untilMono;
  }

  /** Whether the renewal limit set by {@link #renewUntil} (if any) has not passed yet. */
  boolean withinRenewalLimit(long nowMono) {
    return nowMono - renewUntilMono < 0;
  }

  /** Renew this claim no later than {@code untilMono}, nor later than it was to be renewed. */
  void renewAtMostUntil(long untilMono) {
    if (untilMono - renewUntilMono < 0) {
      this.renewUntilMono = untilMono;
    }
  }

  /**
   * Whether the lease still has more than {@code marginNanos} to run and was never lost: the test
   * before a send starts or a batch's key is handed out.
   *
   * @param now on the lease scale
   */
  boolean isLive(long now, long marginNanos) {
    return !lost && leaseDeadline - now > marginNanos;
  }

  /** The guard's estimate of when the lease ends, on the lease scale. */
  long leaseDeadline() {
    return leaseDeadline;
  }

  /** Whether the lease was last asked for (claimed or renewed) more than {@code nanos} ago. */
  boolean renewedLongerAgoThan(long nowMono, long nanos) {
    return nowMono - renewedAtMono > nanos;
  }

  /** Whether the lease ran out (by the guard's estimate, on the lease scale) or was lost. */
  boolean lapsedBy(long now) {
    return lost || now - leaseDeadline >= 0;
  }

  /**
   * Whether the keeper should renew now: a quarter lease old on the monotonic clock, inside its
   * renewal limit, neither lost nor finished, and not being renewed already.
   */
  boolean dueForRenewal(long nowMono, long renewAfterNanos) {
    return !lost
        && !finished
        && !renewing
        && nowMono - renewedAtMono >= renewAfterNanos
        && nowMono - renewUntilMono < 0;
  }

  /** Marks a renewal under way; {@code false} if one already is. */
  synchronized boolean startRenewal() {
    if (renewing) {
      return false;
    }
    renewing = true;
    return true;
  }

  /**
   * Waits until no renewal of this claim is under way (without starting one), keeping an interrupt
   * that arrives meanwhile for later: the wait is as long as the store call of the renewal under
   * way, which its store's timeouts bound.
   */
  synchronized void awaitNoRenewal() {
    boolean interrupted = false;
    while (renewing) {
      try {
        wait();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /** The renewal under way ended, whatever its result. */
  synchronized void endRenewal() {
    renewing = false;
    notifyAll();
  }

  /**
   * The store moved the lease.
   *
   * @param sentAt when the renewal was asked for, on the lease scale
   * @param sentAtMono the same moment on the monotonic clock
   */
  void renewed(long sentAt, long sentAtMono) {
    if (sentAtMono - renewedAtMono > 0) {
      renewedAtMono = sentAtMono;
      leaseDeadline = sentAt + leaseNanos;
    }
  }

  /** The store refused the renewal: another caller holds the key now, or it is gone. */
  void lose() {
    lost = true;
  }

  /**
   * The guard is about to release the key after a failed send: from now on nothing may be sent on
   * this claim ({@link SendContext#leaseHeld()} answers {@code false} to a task the sender handed
   * its provider call to), since another call may claim the key and send as soon as the release
   * lands. Not for an outcome still to be written, whose lease must go on being renewed.
   */
  void giveUp() {
    lost = true;
  }

  boolean isLost() {
    return lost;
  }

  /** {@link SendContext#leaseHeld()} answered {@code false} to this claim's sender. */
  private volatile boolean toldNotHeld;

  /** Lets one {@link SendContext#leaseHeld()} check of this claim answer at a time. */
  private final ReentrantLock leaseHeldCheck = new ReentrantLock();

  /**
   * Answers the sender's {@link SendContext#leaseHeld()} check: {@code false} for good once it
   * answered {@code false} (by its contract the sender sends nothing from then on, so a result it
   * returns is not recorded as the outcome), else what {@code readyToSend} finds, remembered when
   * {@code false}. One check at a time: two tasks of one sender asking at once, the first one's
   * renewal answered too late, must not be told {@code false} and {@code true} (the second one,
   * having renewed again after the first one's renewal, would send, and the call would still count
   * as not sent, so the retry would send again). The second waits for the first one's answer, as
   * long as its renewal, which the store's timeouts bound.
   */
  boolean answerLeaseHeld(BooleanSupplier readyToSend) {
    leaseHeldCheck.lock();
    try {
      if (toldNotHeld) {
        return false;
      }
      boolean held = readyToSend.getAsBoolean();
      if (!held) {
        toldNotHeld = true;
      }
      return held;
    } finally {
      leaseHeldCheck.unlock();
    }
  }

  /** Whether {@link #answerLeaseHeld} answered {@code false}. */
  boolean wasToldNotHeld() {
    return toldNotHeld;
  }

  /** A batch's key was handed out: its send may start. Guarded by this object's monitor. */
  private boolean started;

  /**
   * Marks a batch's key handed out, its send about to start; {@code false} if the claim is lost
   * already (nothing may be sent on it). From now on a renewal the store fails to answer does not
   * lose it ({@link #loseUnlessStarted}).
   */
  synchronized boolean start() {
    if (lost) {
      return false;
    }
    started = true;
    return true;
  }

  /**
   * A renewal the store failed to answer (not refused): the claim is lost, so that nothing is sent
   * on it, unless a send already started on it ({@link #start}): marked lost, that claim would
   * never be renewed again and its lease would run out under the running send; the keeper retries
   * it.
   */
  synchronized void loseUnlessStarted() {
    if (!started) {
      lost = true;
    }
  }

  /** The outcome is written or the key released: nothing more to renew. */
  void finish() {
    finished = true;
  }

  /** Whether the keeper still has a reason to look at this claim. */
  boolean watchable(long nowMono) {
    return !finished && !lost && nowMono - renewUntilMono < 0;
  }

  @Override
  public boolean collectDue(long nowMono, long renewAfterNanos, List<Claim> due) {
    if (!watchable(nowMono)) {
      return false;
    }
    if (dueForRenewal(nowMono, renewAfterNanos)) {
      due.add(this);
    }
    return true;
  }
}
