package dev.idempotency.spring.messaging;

import dev.idempotency.SendContext;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link SendContext}s of a batch's handed-out elements, found by element identity for {@link
 * IdempotentDelivery#context(Object)}. Two elements of one batch may be one object (a deserializer
 * that shares equal values: Kafka's {@code IntegerDeserializer} boxes small values into one cached
 * {@code Integer}); such an object cannot be told apart, so its context is refused with an {@link
 * IllegalStateException}, never another message's given (its provider key would let a provider drop
 * one message as a duplicate of the other). The first refusal of a batch is logged at WARN, naming
 * the listener (never a key). Synchronized: a listener may read from a parallel stream.
 */
final class BatchContexts {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private final String listener;
  private final Map<Object, SendContext> contexts = new IdentityHashMap<>();
  private final Map<Object, int[]> sharedPositions = new IdentityHashMap<>();
  private boolean warned;

  /**
   * @param listener the listener's name, for the refusal
   * @param elements the batch's elements, in order
   */
  BatchContexts(String listener, List<Object> elements) {
    this.listener = listener;
    Map<Object, Integer> firstPosition = new IdentityHashMap<>();
    for (int i = 0; i < elements.size(); i++) {
      Integer first = firstPosition.putIfAbsent(elements.get(i), i);
      if (first != null) {
        sharedPositions.putIfAbsent(elements.get(i), new int[] {first, i});
      }
    }
  }

  /** Notes the context of a handed-out element. */
  synchronized void put(Object element, SendContext context) {
    contexts.put(element, context);
  }

  /**
   * The context of {@code element}, or null if it is not a handed-out element of the batch.
   *
   * @throws IllegalStateException if two elements of the batch are this one object
   */
  synchronized @Nullable SendContext get(Object element) {
    int[] positions = sharedPositions.get(element);
    if (positions != null) {
      IllegalStateException refused = shared(positions);
      if (!warned) {
        warned = true;
        log.warn("{}", refused.getMessage());
      }
      throw refused;
    }
    return contexts.get(element);
  }

  private IllegalStateException shared(int[] positions) {
    return new IllegalStateException(
        "Listener "
            + listener
            + " got one object as messages "
            + positions[0]
            + " and "
            + positions[1]
            + " of its batch (a deserializer that shares equal values, such as small Integers);"
            + " IdempotentDelivery.context(element) cannot tell which message it is, and gives no"
            + " provider key rather than another message's. Take List<ConsumerRecord<K, V>> or"
            + " List<Message<?>> elements, each its own object, and pass the record or message to"
            + " context(element)");
  }
}
