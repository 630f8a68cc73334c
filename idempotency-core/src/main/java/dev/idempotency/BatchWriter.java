package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Writes a {@link Batch}'s reported outcomes: completions one round trip per chunk (retried a few
 * times on a store failure), releases one key at a time, one writer at a time; and counts what it
 * wrote for {@link Batch.Recorded}.
 */
final class BatchWriter {

  final int chunkSize;
  private final GuardSettings settings;
  private final KeyStore store;
  private final ConcurrentLinkedQueue<Batch.Item> pending = new ConcurrentLinkedQueue<>();
  private final AtomicInteger pendingCount = new AtomicInteger();
  private final ReentrantLock writeLock = new ReentrantLock();
  private final AtomicInteger completed = new AtomicInteger();
  private final AtomicInteger stored = new AtomicInteger();
  private final AtomicInteger released = new AtomicInteger();
  private final Set<String> notRecorded = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean writeScheduled = new AtomicBoolean();

  /**
   * The earliest lease deadline (on the lease scale) of the outcomes queued since the last write,
   * as it was when each was queued; renewals only move deadlines later, so this errs early.
   */
  private final AtomicLong earliestQueuedLease = new AtomicLong(Long.MAX_VALUE);

  BatchWriter(GuardSettings settings) {
    this.settings = settings;
    this.store = settings.store;
    this.chunkSize = Math.max(1, store.maxBatchSize());
  }

  /**
   * Queues a reported item ({@code outcome} null: release). The item's fields are published to the
   * writer by the queue.
   */
  void enqueue(Batch.Item item) {
    earliestQueuedLease.accumulateAndGet(item.claim.leaseDeadline(), Math::min);
    pending.add(item);
    pendingCount.incrementAndGet();
  }

  /**
   * A reported send whose outcome can be neither recorded nor released ({@link
   * OutcomeAbandonedException}): left claimed, as {@code execute} and a crash leave it. Nothing is
   * written, the lease is no longer renewed and runs out; a repeat may then take the key over.
   */
  void abandon(Batch.Item item) {
    item.state.set(Batch.Item.DONE);
    item.call.finish(item.claim);
    notRecorded.add(item.key());
    item.call.events.emit(
        Type.OUTCOME_ABANDONED, item.attempt(), item.call.events.elapsed(), item.failure);
  }

  /** Writes the queue now, on the reporting thread, if a full chunk is queued. */
  void writeIfChunkFull() {
    if (pendingCount.get() >= chunkSize) {
      writePending();
    }
  }

  /**
   * The keeper's round: if the oldest queued outcome has waited {@code periodNanos} (monotonic),
   * has the queue written on the guard's blocking-store executor, never on the keeper's thread.
   */
  void writeSoonIfWaited(long nowMono, long periodNanos) {
    Batch.Item oldest = pending.peek();
    if (oldest == null
        || nowMono - oldest.reportedAtMono < periodNanos
        || !writeScheduled.compareAndSet(false, true)) {
      return;
    }
    try {
      settings.blockingStoreExecutor.execute(
          () -> {
            try {
              writePending();
            } finally {
              writeScheduled.set(false);
            }
          });
    } catch (RejectedExecutionException e) {
      writeScheduled.set(false);
    }
  }

  /**
   * Writes the queue now, on this thread, if a queued outcome's lease has less than {@code
   * marginNanos} left by the guard's clock ({@code now}, on the lease scale): before the batch
   * hands out its next key, so that a reported key never lapses unwritten when the guard's clock
   * runs ahead of the keeper's real-time schedule (a clock step, a test clock).
   */
  void writeIfLeaseShort(long now, long marginNanos) {
    if (earliestQueuedLease.get() - now < marginNanos && !pending.isEmpty()) {
      writePending();
    }
  }

  /** Whether outcomes are queued and not yet written. */
  boolean hasPending() {
    return !pending.isEmpty();
  }

  /**
   * Writes what is queued, releases the claimed items that got no outcome (never handed out,
   * lapsed), and returns the counts of everything written. An item handed out and not reported is
   * left claimed, since its send may still run (the thread it was handed out on may have passed it
   * to another): its report writes it later; with {@code releaseHandedOutHere}, one handed out on
   * this thread is released instead ({@link Batch#recordReleasingUnreported()}). An item never
   * handed out had nothing sent under its claim: it is taken back ({@link
   * dev.idempotency.spi.KeyStore#takeBack}), which keeps the trace of an earlier owner's attempt
   * when the batch's claim was a takeover.
   */
  Batch.Recorded finish(Iterable<Batch.Item> claimed, boolean releaseHandedOutHere) {
    writeLock.lock();
    try (Interrupts deferred = Interrupts.deferred()) {
      writePending(deferred);
      Set<String> stillSending = new HashSet<>();
      for (Batch.Item item : claimed) {
        boolean unreported;
        boolean unsent;
        boolean sending;
        // under the monitor Item.markHandedOut takes: a key next() hands out concurrently is
        // handed out before this (then left to its send, or released) or never (then taken back)
        synchronized (item) {
          int state = item.state.get();
          sending = item.recordable() && item.mayStillBeSending(releaseHandedOutHere);
          unreported =
              item.recordable()
                  && !sending
                  && (state == Batch.Item.NEW || state == Batch.Item.LAPSED)
                  && item.state.compareAndSet(state, Batch.Item.DONE);
          unsent = !item.handedOut();
        }
        if (sending) {
          // its send may still run, on whatever thread the caller gave it to: released now, it
          // would be sent again by a repeat while that send goes on (SPEC 1). Left claimed, still
          // counted as running; its report writes it (BatchReports#reportAfterRecord), else its
          // lease
          // runs out.
          stillSending.add(item.key());
          continue;
        }
        if (unreported) {
          release(item, unsent, deferred);
        }
        item.stopRunning(settings.inFlight);
      }
      Set<String> unrecorded = new HashSet<>(notRecorded);
      unrecorded.addAll(stillSending);
      return new Batch.Recorded(
          completed.get(), stored.get(), released.get(), Set.copyOf(unrecorded));
    } finally {
      writeLock.unlock();
    }
  }

  /** Writes the queued outcomes now, on this thread: the guard is closing. */
  void writeNow() {
    writePending();
  }

  /** Writes the queued outcomes: completions per chunk, then releases. One writer at a time. */
  private void writePending() {
    try (Interrupts deferred = Interrupts.deferred()) {
      writePending(deferred);
    }
  }

  private void writePending(Interrupts deferred) {
    writeLock.lock();
    try {
      earliestQueuedLease.set(Long.MAX_VALUE);
      List<Batch.Item> writes = new ArrayList<>();
      List<Batch.Item> releases = new ArrayList<>();
      Batch.Item item;
      while ((item = pending.poll()) != null) {
        pendingCount.decrementAndGet();
        (item.outcome != null ? writes : releases).add(item);
      }
      for (int from = 0; from < writes.size(); from += chunkSize) {
        writeChunk(writes.subList(from, Math.min(writes.size(), from + chunkSize)), deferred);
      }
      for (Batch.Item toRelease : releases) {
        release(toRelease, false, deferred);
      }
    } finally {
      writeLock.unlock();
    }
  }

  private void writeChunk(List<Batch.Item> chunk, Interrupts deferred) {
    List<CompleteRequest> requests = new ArrayList<>(chunk.size());
    for (Batch.Item item : chunk) {
      requests.add(item.call.complete(item.claim, item.outcome, item.payload));
    }
    RuntimeException lastFailure = null;
    List<Boolean> written = null;
    for (int round = 1; round <= settings.completionAttempts && written == null; round++) {
      deferred.clear();
      try {
        ChunkCompletion.Result result = ChunkCompletion.completeAll(store, requests);
        written = result.written();
        lastFailure = result.failure();
      } catch (RuntimeException e) {
        lastFailure = e;
        if (round < settings.completionAttempts) {
          deferred.sleep(CallSupport.completionBackoffMillis(round));
        }
      }
    }
    for (int i = 0; i < chunk.size(); i++) {
      Batch.Item item = chunk.get(i);
      item.state.set(Batch.Item.DONE);
      if (written == null || written.get(i) == null) {
        notRecorded.add(item.key());
        item.call.recordLater(item.claim, item.outcome, item.payload, lastFailure);
      } else if (!written.get(i)) {
        item.call.finish(item.claim);
        notRecorded.add(item.key());
        item.call.events.notRecorded(item.attempt(), null);
      } else if (item.outcome == RecordState.COMPLETED) {
        item.call.finish(item.claim);
        completed.incrementAndGet();
        item.call.events.emit(Type.COMPLETED, item.attempt(), item.call.events.elapsed(), null);
      } else {
        item.call.finish(item.claim);
        stored.incrementAndGet();
        item.call.events.emit(
            Type.FAILURE_STORED, item.attempt(), item.call.events.elapsed(), item.failure);
      }
    }
  }

  /**
   * Releases an item's claim, fenced by its token: a reported failure's release (SPEC 6: a fenced
   * delete), or the take-back of a claim nothing was sent under ({@code unsent}).
   */
  private void release(Batch.Item item, boolean unsent, Interrupts deferred) {
    item.state.set(Batch.Item.DONE);
    item.claim.giveUp();
    item.call.finish(item.claim);
    deferred.clear();
    String keyId = item.call.keyId;
    String token = item.claim.ownerToken;
    try {
      if (unsent
          ? store.takeBack(keyId, token, settings.clock.instant())
          : store.release(keyId, token)) {
        released.incrementAndGet();
        item.call.events.emit(
            Type.RELEASED, item.attempt(), item.call.events.elapsed(), item.failure);
      }
    } catch (RuntimeException e) {
      item.call.events.releaseFailed(e);
      if (unsent) {
        settings.pendingOutcomes.unsentClaims.takeBack(keyId, token); // tried again, fenced
      } else {
        settings.pendingOutcomes.unsentClaims.release(keyId, token); // tried again, fenced
      }
    }
  }
}
