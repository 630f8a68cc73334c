package dev.idempotency;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;

/**
 * The batches of {@link IdempotencyGuard#claimBatches}: the requests read {@code batchSize} at a
 * time as the loop asks for the next batch, each claimed then, and the previous one recorded when
 * the loop moves past it (if it did not record it itself). Iterable once.
 */
final class BatchSequence<T> implements Iterable<Batch<T>> {

  private final Iterable<IdempotencyRequest> requests;
  private final int batchSize;
  private final Function<List<IdempotencyRequest>, Batch<T>> claim;
  private final AtomicBoolean iterated = new AtomicBoolean();

  /**
   * @param requests the keys, read as the batches are claimed
   * @param batchSize keys per batch, at least 1
   * @param claim claims one batch ({@link IdempotencyGuard#claimBatch})
   */
  BatchSequence(
      Iterable<IdempotencyRequest> requests,
      int batchSize,
      Function<List<IdempotencyRequest>, Batch<T>> claim) {
    this.requests = requests;
    this.batchSize = batchSize;
    this.claim = claim;
  }

  @Override
  public Iterator<Batch<T>> iterator() {
    if (!iterated.compareAndSet(false, true)) {
      throw new IllegalStateException("the batches of claimBatches may be iterated once");
    }
    Iterator<IdempotencyRequest> source = requests.iterator();
    return new Iterator<Batch<T>>() {
      private Batch<T> current;

      @Override
      public boolean hasNext() {
        if (source.hasNext()) {
          return true;
        }
        if (current != null) {
          current.close(); // the last batch: records it, if the loop did not
        }
        return false;
      }

      @Override
      public Batch<T> next() {
        if (current != null) {
          current.close(); // records it, if the loop did not
        }
        List<IdempotencyRequest> next = new ArrayList<>(Math.min(batchSize, 10_000));
        while (next.size() < batchSize && source.hasNext()) {
          next.add(source.next());
        }
        if (next.isEmpty()) {
          throw new NoSuchElementException();
        }
        current = claim.apply(next);
        return current;
      }
    };
  }
}
