package dev.idempotency;

import java.util.ArrayList;
import java.util.List;

/**
 * Keeps a {@link Batch}'s leases ahead of its sends by the guard's clock, whatever the keeper's
 * real-time schedule does: a clock that runs ahead of real time (a forward step, a test clock) must
 * not let a key lapse while it is being sent, nor a reported outcome lapse unwritten.
 *
 * <p>Before each hand-out the batch looks one send ahead: the <em>horizon</em> is now plus the
 * longest send seen so far in this batch (by the guard's clock, from a key's hand-out to its
 * report) plus the keeper's margin. It writes the reported outcomes whose leases end before the
 * horizon, renews (fenced, one {@code extendAll} per chunk, on the calling thread) the unreported
 * keys whose leases end before it, and hands the key out only if its lease outlasts it. With a
 * clock in step with real time the keeper's renewals keep every lease beyond the horizon and this
 * costs no store call; a lower bound of the earliest unreported lease spares the scan of the
 * batch's keys until it could matter.
 *
 * <p>Thread-safe: keys may be handed out and reported from several threads.
 */
final class BatchLeases {

  private final GuardSettings settings;

  /** The longest send seen so far, capped so that a fresh lease always outlasts the horizon. */
  private volatile long longestSendNanos;

  private final long maxSendNanos;

  /**
   * No unreported key's lease ends before this (on the lease scale): renewals only move deadlines
   * later, so the bound stays true until it is recomputed. Valid only when {@link #boundKnown}.
   */
  private volatile long earliestDeadlineBound;

  private volatile boolean boundKnown;

  BatchLeases(GuardSettings settings) {
    this.settings = settings;
    this.maxSendNanos = settings.leaseNanos - 2 * settings.keeper.marginNanos;
  }

  /** How far ahead of now a hand-out must see: the longest send so far plus the keeper's margin. */
  long horizonNanos() {
    return longestSendNanos + settings.keeper.marginNanos;
  }

  /** A key handed out at {@code handedOutAt} (lease scale) was reported now. */
  void sendEnded(long handedOutAt, long now) {
    long took = Math.min(now - handedOutAt, maxSendNanos);
    if (took > longestSendNanos) {
      synchronized (this) {
        if (took > longestSendNanos) {
          longestSendNanos = took;
        }
      }
    }
  }

  /** A chunk was claimed whose earliest lease ends at {@code deadline}: lowers the bound. */
  synchronized void claimed(long deadline) {
    if (!boundKnown || deadline - earliestDeadlineBound < 0) {
      earliestDeadlineBound = deadline;
      boundKnown = true;
    }
  }

  /**
   * Renews, on this thread, every unreported claim of {@code items} whose lease ends before {@code
   * horizon}; one that the store refuses is lost, and so is one not handed out yet that the store
   * cannot renew (it is never handed out). A key already handed out that the store cannot renew
   * stays as it is, for the keeper to retry: its send is running.
   */
  void renewBefore(long horizon, Iterable<Batch.Item> items) {
    if (boundKnown && earliestDeadlineBound - horizon >= 0) {
      return;
    }
    synchronized (this) {
      if (boundKnown && earliestDeadlineBound - horizon >= 0) {
        return; // another thread renewed meanwhile
      }
      List<Claim> due = new ArrayList<>();
      List<Claim> dueSending = new ArrayList<>();
      List<Claim> kept = new ArrayList<>();
      for (Batch.Item item : items) {
        Claim claim = item.claim;
        if (claim == null || item.state.get() != Batch.Item.NEW || claim.isLost()) {
          continue;
        }
        if (claim.leaseDeadline() - horizon >= 0) {
          kept.add(claim);
        } else {
          (item.handedOut() ? dueSending : due).add(claim);
        }
      }
      settings.keeper.renewNow(due);
      settings.keeper.renewStartedNow(dueSending);
      boundKnown = false;
      for (List<Claim> claims : List.of(kept, due, dueSending)) {
        for (Claim claim : claims) {
          if (!claim.isLost()) {
            claimed(claim.leaseDeadline());
          }
        }
      }
    }
  }
}
