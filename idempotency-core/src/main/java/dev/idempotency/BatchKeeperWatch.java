package dev.idempotency;

import java.util.List;

/**
 * The guard's lease keeper's watch of a {@link Batch}: while the batch has leases to renew or
 * outcomes to write, the keeper watches it, renews its keys' leases and has its waiting outcomes
 * written; a batch with neither is let go (so that an abandoned batch is renewed no longer than the
 * guard's renewal limit and is not kept reachable) and watched again when it is used again. Owns
 * when the batch was last active and whether {@link Batch#record()} has ended.
 *
 * <p>Thread-safe: the keeper's thread, the send loops and the reporting threads all call it.
 */
final class BatchKeeperWatch {

  private final GuardSettings settings;
  private final BatchWriter writer;
  private final Iterable<Batch.Item> claimed;
  private final Object watchLock = new Object();
  private boolean watchedByKeeper; // guarded by watchLock

  /** Whether {@link Batch#record()} wrote what was queued before it. */
  private volatile boolean recorded;

  /** When a key was last handed out or reported, on the monotonic clock. */
  private volatile long lastActivityMono;

  private final LeaseKeeper.Watched watcher =
      new LeaseKeeper.Watched() {
        @Override
        public boolean collectDue(long nowMono, long renewAfterNanos, List<Claim> due) {
          return BatchKeeperWatch.this.collectDue(nowMono, renewAfterNanos, due);
        }

        @Override
        public void closing() {
          writer.writeNow();
        }
      };

  BatchKeeperWatch(GuardSettings settings, BatchWriter writer, Iterable<Batch.Item> claimed) {
    this.settings = settings;
    this.writer = writer;
    this.claimed = claimed;
  }

  /**
   * A key was handed out or reported at {@code nowMono}: the batch is active (its keys renewed).
   */
  void activeAt(long nowMono) {
    lastActivityMono = nowMono;
  }

  /**
   * Has the keeper watch this batch, again if it let it go while the batch was idle.
   *
   * @return {@code false} if the guard closed its keeper: the close wrote the outcomes queued
   *     before this call, and writes none queued after it
   */
  boolean keepWatched() {
    synchronized (watchLock) {
      if (recorded) {
        return true; // recorded: record() wrote the queue, and a report it stopped waiting for
        // writes
      }
      // asked each time, not only when not yet watched: the keeper orders this against its close
      if (!settings.keeper.watch(watcher)) {
        watchedByKeeper = false;
        return false;
      }
      watchedByKeeper = true;
      return true;
    }
  }

  /** {@link Batch#record()} begins to write: the keeper no longer watches the batch. */
  void stopForRecord() {
    synchronized (watchLock) {
      watchedByKeeper = false;
      settings.keeper.unwatch(watcher);
    }
  }

  /**
   * {@link Batch#record()} wrote what it found. Keys whose sends still run elsewhere stay claimed:
   * renewed (for the renewal limit from their hand-out) until their reports write them, as an
   * abandoned batch's are.
   */
  void recorded() {
    recorded = true;
    if (anySendingElsewhere()) {
      synchronized (watchLock) {
        watchedByKeeper = settings.keeper.watch(watcher);
      }
    }
  }

  /** Whether a key {@link BatchWriter#finish} left claimed for its running send is unreported. */
  private boolean anySendingElsewhere() {
    for (Batch.Item item : claimed) {
      if (item.recordable() && item.handedOut() && item.state.get() == Batch.Item.NEW) {
        return true;
      }
    }
    return false;
  }

  /**
   * The keeper's round (monotonic time): has outcomes that waited a period written (on the blocking
   * store executor), and collects the leases to renew: reported keys until written, handed-out keys
   * for the renewal limit from their hand-out, the others while the batch is active. A batch with
   * nothing left to renew or write lets the keeper go of it, so that an abandoned batch (never
   * recorded) is renewed no longer than the limit and is not kept reachable; it is watched again if
   * it is used again.
   */
  private boolean collectDue(long nowMono, long renewAfterNanos, List<Claim> due) {
    writer.writeSoonIfWaited(nowMono, settings.keeper.periodNanos);
    long limit = settings.leaseRenewalLimitNanos;
    boolean active = nowMono - lastActivityMono < limit;
    boolean anyRenewable = false;
    for (Batch.Item item : claimed) {
      if (item.claim == null) {
        continue;
      }
      int state = item.state.get();
      long handedOutAt = item.handedOutAtMono();
      boolean renew =
          state == Batch.Item.REPORTED
              || (state == Batch.Item.NEW
                  && (handedOutAt != 0 ? nowMono - handedOutAt < limit : active));
      if (!renew || item.claim.isLost()) {
        continue;
      }
      anyRenewable = true;
      if (item.claim.dueForRenewal(nowMono, renewAfterNanos)) {
        due.add(item.claim);
      }
    }
    if (!anyRenewable && !writer.hasPending()) {
      letGo(nowMono);
    }
    return true;
  }

  /** Stops the keeper's watch if nothing happened since {@code sinceMono}. */
  private void letGo(long sinceMono) {
    synchronized (watchLock) {
      if (watchedByKeeper && lastActivityMono - sinceMono <= 0 && !writer.hasPending()) {
        watchedByKeeper = false;
        settings.keeper.unwatch(watcher);
      }
    }
  }
}
