package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
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

  BatchWriter(GuardSettings settings) {
    this.settings = settings;
    this.store = settings.store;
    this.chunkSize = Math.max(1, store.maxBatchSize());
  }

  /**
   * Queues a reported item ({@code outcome} null: release) and writes a full chunk at once, on the
   * reporting thread. The item's fields are published to the writer by the queue.
   */
  void enqueue(Batch.Item item) {
    pending.add(item);
    if (pendingCount.incrementAndGet() >= chunkSize) {
      writePending();
    }
  }

  /** Writes the queue if its oldest item has waited {@code periodNanos}: the keeper's round. */
  void writeIfWaited(long now, long periodNanos) {
    Batch.Item oldest = pending.peek();
    if (oldest != null && now - oldest.reportedAt >= periodNanos) {
      writePending();
    }
  }

  /**
   * Writes what is queued, releases the claimed items that got no outcome (never reported, lapsed),
   * and returns the counts of everything written.
   */
  Batch.Recorded finish(List<Batch.Item> claimed) {
    writeLock.lock();
    try {
      writePending();
      for (Batch.Item item : claimed) {
        int state = item.state.get();
        if (item.recordable()
            && (state == Batch.Item.NEW || state == Batch.Item.LAPSED)
            && item.state.compareAndSet(state, Batch.Item.DONE)) {
          release(item);
        }
      }
      return new Batch.Recorded(
          completed.get(), stored.get(), released.get(), Set.copyOf(notRecorded));
    } finally {
      writeLock.unlock();
    }
  }

  /** Writes the queued outcomes: completions per chunk, then releases. One writer at a time. */
  private void writePending() {
    writeLock.lock();
    try {
      List<Batch.Item> writes = new ArrayList<>();
      List<Batch.Item> releases = new ArrayList<>();
      Batch.Item item;
      while ((item = pending.poll()) != null) {
        pendingCount.decrementAndGet();
        (item.outcome != null ? writes : releases).add(item);
      }
      for (int from = 0; from < writes.size(); from += chunkSize) {
        writeChunk(writes.subList(from, Math.min(writes.size(), from + chunkSize)));
      }
      for (Batch.Item toRelease : releases) {
        release(toRelease);
      }
    } finally {
      writeLock.unlock();
    }
  }

  private void writeChunk(List<Batch.Item> chunk) {
    List<CompleteRequest> requests = new ArrayList<>(chunk.size());
    for (Batch.Item item : chunk) {
      requests.add(item.call.complete(item.claim, item.outcome, item.payload));
    }
    RuntimeException lastFailure = null;
    List<Boolean> written = null;
    for (int round = 1; round <= settings.completionAttempts && written == null; round++) {
      try {
        written = store.completeAll(requests);
      } catch (RuntimeException e) {
        lastFailure = e;
        if (round < settings.completionAttempts
            && !CallSupport.pause(CallSupport.completionBackoffMillis(round))) {
          break;
        }
      }
    }
    for (int i = 0; i < chunk.size(); i++) {
      Batch.Item item = chunk.get(i);
      item.state.set(Batch.Item.DONE);
      item.call.finish(item.claim);
      if (written == null || !written.get(i)) {
        notRecorded.add(item.key());
        item.call.events.notRecorded(item.attempt(), written == null ? lastFailure : null);
      } else if (item.outcome == RecordState.COMPLETED) {
        completed.incrementAndGet();
        item.call.events.emit(Type.COMPLETED, item.attempt(), item.call.events.elapsed(), null);
      } else {
        stored.incrementAndGet();
        item.call.events.emit(
            Type.FAILURE_STORED, item.attempt(), item.call.events.elapsed(), item.failure);
      }
    }
  }

  private void release(Batch.Item item) {
    item.state.set(Batch.Item.DONE);
    item.call.finish(item.claim);
    try {
      if (store.release(item.call.keyId, item.claim.ownerToken)) {
        released.incrementAndGet();
        item.call.events.emit(
            Type.RELEASED, item.attempt(), item.call.events.elapsed(), item.failure);
      }
    } catch (RuntimeException e) {
      item.call.events.releaseFailed(e);
    }
  }
}
