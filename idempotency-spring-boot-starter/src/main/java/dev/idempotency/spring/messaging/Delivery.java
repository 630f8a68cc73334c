package dev.idempotency.spring.messaging;

import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What a broker's container is handing to a listener on this thread: its messages' headers (one
 * message, or a batch in the order the listener gets them) and how a batch reports the message it
 * failed at. Bound by each broker's hook (Kafka's record and batch interceptors, RabbitMQ's advice
 * chain, the JMS listener wrapper) around the listener's invocation.
 *
 * @param headers each message's headers, values as the broker gives them
 * @param batch whether the listener gets the messages as a batch
 * @param failures how the container learns which message of a batch failed
 */
record Delivery(List<Map<String, Object>> headers, boolean batch, BatchFailures failures) {

  private static final ThreadLocal<Delivery> CURRENT = new ThreadLocal<>();

  /**
   * How a container learns which message of a batch failed: Spring Kafka's {@code
   * BatchListenerFailedException}; elsewhere the whole batch fails ({@link #WHOLE_BATCH}).
   */
  interface BatchFailures {

    /**
     * What the listener's caller gets when message {@code index} of the batch failed (or must come
     * back later) with {@code cause}, the messages before it being done.
     */
    RuntimeException failedAt(int index, Throwable cause);

    /**
     * The index in {@code elements} of the message a listener's failure names, or -1 if it names
     * none (then none of the batch is known to be done).
     */
    int indexIn(Throwable failure, List<?> elements);
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

  /** The headers of message {@code index}, or none. */
  Map<String, Object> headersOf(int index) {
    return index < headers.size() ? headers.get(index) : Map.of();
  }
}
