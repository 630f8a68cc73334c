package dev.idempotency.spring.messaging;

import dev.idempotency.SendContext;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The provider the test listeners send through: it records each accepted send (with the provider
 * key and attempt the listener passed), counts every run of a listener's body, and fails the sends
 * a test asks it to fail.
 */
public final class Sends {

  /** A send the provider accepted. */
  public record Send(String listener, String event, String providerKey, int attempt) {}

  /** A failure the provider reports for one send; the key is released and the broker retries. */
  public static final class TransientFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TransientFailure(String event) {
      super("the provider failed for " + event + " (test)");
    }
  }

  /** A failure the test's classifier calls permanent: it is stored for the window. */
  public static final class PermanentFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public PermanentFailure(String event) {
      super("the recipient of " + event + " does not exist (test)");
    }
  }

  private final List<Send> accepted = new CopyOnWriteArrayList<>();
  private final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> failuresLeft = new ConcurrentHashMap<>();
  private volatile boolean batchesCopied;
  private volatile boolean batchesBackwards;

  /** Fails the next {@code times} sends of {@code event}. */
  public void failNext(String event, int times) {
    failuresLeft.put(event, new AtomicInteger(times));
  }

  /** A listener's send of one event. */
  public void send(String listener, String event, SendContext context) {
    runs.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
    AtomicInteger left = failuresLeft.get(event);
    if (left != null && left.getAndDecrement() > 0) {
      throw new TransientFailure(event);
    }
    accepted.add(new Send(listener, event, context.providerKey(), context.attempt()));
  }

  /** Makes {@link #sendBatch} copy each list before its sends, as a defensive copy would. */
  public void copyBatches(boolean copied) {
    this.batchesCopied = copied;
  }

  /** Makes {@link #sendBatch} read each list from its last message to its first, or in order. */
  public void readBatchesBackwards(boolean backwards) {
    this.batchesBackwards = backwards;
  }

  /**
   * A batch listener's sends: each message of its list in order (of a copy of the list, or from the
   * last message to the first, if a test asked for it), a failed send named by its index in a
   * {@link BatchDeliveryFailedException}.
   */
  public void sendBatch(String listener, List<String> list) {
    List<String> events = batchesCopied ? new ArrayList<>(list) : list;
    boolean backwards = batchesBackwards;
    int size = events.size();
    for (int n = 0; n < size; n++) {
      int i = backwards ? size - 1 - n : n;
      String event = events.get(i);
      try {
        send(listener, event, IdempotentDelivery.context(event));
      } catch (RuntimeException failure) {
        throw new BatchDeliveryFailedException(i, failure);
      }
    }
  }

  /** The accepted sends of one event. */
  public List<Send> of(String event) {
    return accepted.stream().filter(send -> send.event().equals(event)).toList();
  }

  /** How many times a listener's body ran for one event, failed runs included. */
  public int runs(String event) {
    AtomicInteger count = runs.get(event);
    return count == null ? 0 : count.get();
  }
}
