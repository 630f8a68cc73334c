package dev.idempotency.spring.messaging;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What a broker's container is handing to a listener on this thread: its messages' headers (one
 * message, or a batch in the order the container polled them) and how a batch reports the message
 * it failed at. Bound by each broker's hook (Kafka's record and batch interceptors, RabbitMQ's
 * advice chain, the JMS listener wrapper) around the listener's invocation.
 *
 * <p>A listener may get fewer messages than the container polled: Spring Kafka's {@code
 * RecordFilterStrategy} drops some before the listener runs. {@link #positionsOf} tells where each
 * message the listener got sits among those polled, so that it is read with its own headers and a
 * failure names it where the container will look for it.
 *
 * @param headers each polled message's headers, values as the broker gives them
 * @param batch whether the listener gets the messages as a batch
 * @param failures how the container learns which message of a batch failed
 * @param polled the messages as the container polled them (Kafka's records), to find the listener's
 *     elements among; empty where the listener always gets them all
 * @param onConsumerThread whether the listener runs on a Kafka, RabbitMQ or JMS container's
 *     consumer thread, which must not be left interrupted ({@link ConsumerThreadInterrupts})
 * @param deferral the deferrals the guard threw for this delivery, kept for the broker's hook
 */
record Delivery(
    List<Map<String, Object>> headers,
    boolean batch,
    BatchFailures failures,
    List<?> polled,
    boolean onConsumerThread,
    KeptDeferral deferral) {

  /** A delivery; the components as for the record's. */
  Delivery(
      List<Map<String, Object>> headers,
      boolean batch,
      BatchFailures failures,
      List<?> polled,
      boolean onConsumerThread) {
    this(headers, batch, failures, polled, onConsumerThread, new KeptDeferral());
  }

  /**
   * A delivery whose listener gets every message the container has; {@code onConsumerThread} as for
   * the record's component.
   */
  Delivery(
      List<Map<String, Object>> headers,
      boolean batch,
      BatchFailures failures,
      boolean onConsumerThread) {
    this(headers, batch, failures, List.of(), onConsumerThread);
  }

  /**
   * The deferrals the guard threw for the delivery's guarded calls that have not returned since
   * ({@link DeferredDeliveryException#deferralIn}), one per call (a record listener's by its
   * operation and key, a batch listener's by its operation and its elements' keys in order, an
   * {@code Idempotent} method's by its operation and key: {@link DeliveryDeferrals}): the guard
   * throws each inside the listener bean's proxy, where an application's advice ordered before the
   * guard (a "log and continue" aspect), or an unguarded listener that calls a guarded method and
   * catches what it throws, may drop it and return, and the container would then acknowledge the
   * message unsent. Each broker's hook, finding the listener returned with a deferral kept, defers
   * the delivery all the same. A deferral is forgotten only when a later call of the same operation
   * and keys (a retry) returns or fails otherwise: a call for other keys that sends must not erase
   * it (one delivery may notify several recipients, each its own key, or send its batch in chunks,
   * each its own call). A call whose keys were not read forgets none. Thread-safe.
   */
  static final class KeptDeferral {
    private final Map<Object, Throwable> failures = new LinkedHashMap<>();

    /**
     * {@code call} ended: keeps {@code failure} (what the guard threw, as the container would have
     * got it) if it is a deferral ({@link DeferredDeliveryException#deferralIn}); otherwise (it
     * returned: {@code null}, or failed otherwise) forgets the deferral kept for the call, if any.
     */
    synchronized void settle(Object call, @Nullable Throwable failure) {
      if (failure != null && DeferredDeliveryException.deferralIn(failure) != null) {
        failures.put(call, failure);
      } else {
        failures.remove(call);
      }
    }

    /** The first deferral still kept, or {@code null}. */
    synchronized @Nullable Throwable get() {
      return failures.isEmpty() ? null : failures.values().iterator().next();
    }
  }

  private static final ThreadLocal<Delivery> CURRENT = new ThreadLocal<>();

  /**
   * How a container learns which message of a batch failed: Spring Kafka's {@code
   * BatchListenerFailedException}; elsewhere the whole batch fails ({@link #WHOLE_BATCH}).
   */
  interface BatchFailures {

    /**
     * What the listener's caller gets when message {@code index} (among those the container polled)
     * of the batch failed (or must come back later) with {@code cause}, the messages before it
     * being done.
     */
    RuntimeException failedAt(int index, Throwable cause);

    /**
     * The index in {@code elements} of the message a listener's failure names, or -1 if it names
     * none (then none of the batch is known to be done).
     */
    int indexIn(Throwable failure, List<?> elements);

    /**
     * Whether the container takes the messages before the failed one as done (Spring Kafka commits
     * them); {@code false} where the whole batch comes back whatever the index.
     */
    default boolean commitsBefore() {
      return true;
    }
  }

  /** The cause as it is: the container fails (and redelivers) the whole batch. */
  static final BatchFailures WHOLE_BATCH =
      new BatchFailures() {
        @Override
        public RuntimeException failedAt(int index, Throwable cause) {
          return cause instanceof RuntimeException runtime
              ? runtime
              : new IllegalStateException("the listener failed", cause);
        }

        @Override
        public int indexIn(Throwable failure, List<?> elements) {
          return -1;
        }

        @Override
        public boolean commitsBefore() {
          return false;
        }
      };

  /** The delivery being handed to a listener on this thread, if a broker hook bound one. */
  static @Nullable Delivery current() {
    return CURRENT.get();
  }

  /** Binds a delivery to this thread; returns what was bound before, to restore. */
  static @Nullable Delivery bind(Delivery delivery) {
    Delivery previous = CURRENT.get();
    CURRENT.set(delivery);
    return previous;
  }

  /** Restores what {@link #bind} returned. */
  static void restore(@Nullable Delivery previous) {
    if (previous == null) {
      CURRENT.remove();
    } else {
      CURRENT.set(previous);
    }
  }

  /**
   * Where each of a batch listener's {@code elements} sits among the messages the container polled,
   * in order: a record or a message by its own identity only (the record itself, or the topic,
   * partition and offset a Spring message of a Kafka record carries), a payload by the identity of
   * its value when exactly one polled record not yet matched has it; or, if the listener got every
   * message, its own index. {@code null} if that cannot be told (a filtered batch of converted
   * payloads, or of values that several records share, such as the small {@code Integer}s Kafka's
   * deserializer boxes into one cached object): then no element may be read with a polled message's
   * headers (the key of another record would be lent to it), and an element's index is the safe one
   * to report, since every polled message before it was filtered out or came before it in the
   * listener's list.
   */
  int @Nullable [] positionsOf(List<?> elements) {
    int size = elements.size();
    if (!polled.isEmpty()) {
      int[] positions = new int[size];
      int next = 0;
      for (int i = 0; i < size && next >= 0; i++) {
        int found = positionOf(elements.get(i), next);
        positions[i] = found;
        next = found < 0 ? -1 : found + 1;
      }
      if (next >= 0) {
        return positions;
      }
    }
    if (headers.size() != size) {
      return null;
    }
    int[] same = new int[size];
    for (int i = 0; i < size; i++) {
      same[i] = i;
    }
    return same;
  }

  /**
   * The index of {@code element} among the polled messages from {@code from} on, or -1 if it is not
   * there or a payload that more than one of them has (ambiguous: never guessed).
   */
  private int positionOf(@Nullable Object element, int from) {
    if (element == null) {
      return -1;
    }
    boolean message = Messages.headersOf(element) != null;
    int found = -1;
    for (int j = from; j < polled.size(); j++) {
      Object candidate = polled.get(j);
      if (message) {
        if (Messages.isMessageOf(element, candidate)) {
          return j;
        }
      } else if (element == Messages.payloadOf(candidate)) {
        if (found >= 0) {
          return -1;
        }
        found = j;
      }
    }
    return found;
  }

  /**
   * Polled message {@code index} as the container names it (a Kafka record's topic, partition and
   * offset), or {@code null} where unknown.
   */
  @Nullable String recordIdAt(int index) {
    return index >= 0 && index < polled.size() ? Messages.recordId(polled.get(index)) : null;
  }

  /** The headers of message {@code index}, or none. */
  Map<String, Object> headersOf(int index) {
    return index < headers.size() ? headers.get(index) : Map.of();
  }
}
