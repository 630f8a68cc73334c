package dev.idempotency.spring.messaging;

import dev.idempotency.SendContext;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The {@link SendContext} of the delivery an {@link IdempotentListener} is handling, for the
 * provider call: pass {@link SendContext#providerKey()} to a provider that deduplicates, so that
 * the rare duplicate after a crash (the same key sent again at attempt 2) is absorbed there.
 *
 * <pre>{@code
 * @RabbitListener(queues = "welcome")
 * @IdempotentListener(key = "#signup.userId")
 * void onSignup(Signup signup) {
 *   mail.send(signup.email(), "welcome", IdempotentDelivery.context().providerKey());
 * }
 *
 * @KafkaListener(topics = "order-shipped", batch = "true")
 * @IdempotentListener(key = "orderId")
 * void onShipped(List<OrderShipped> events) {
 *   for (OrderShipped event : events) {
 *     mail.send(event.email(), "shipped", IdempotentDelivery.context(event).providerKey());
 *   }
 * }
 * }</pre>
 *
 * <p>Bound to the listener's thread while it runs; thread-safe.
 */
public final class IdempotentDelivery {

  private static final ThreadLocal<SendContext> RECORD = new ThreadLocal<>();
  private static final ThreadLocal<Map<Object, SendContext>> BATCH = new ThreadLocal<>();

  private IdempotentDelivery() {}

  /**
   * The context of the delivery a record listener is handling.
   *
   * @return the context
   * @throws IllegalStateException outside a record listener annotated with {@link
   *     IdempotentListener}
   */
  public static SendContext context() {
    SendContext context = RECORD.get();
    if (context == null) {
      throw new IllegalStateException(
          "no idempotent delivery on this thread: call IdempotentDelivery.context() from a record"
              + " listener annotated with @IdempotentListener (in a batch listener, use"
              + " context(element))");
    }
    return context;
  }

  /**
   * The context of one message of the batch a batch listener is handling.
   *
   * @param element an element of the list the listener got (the same object)
   * @return the context
   * @throws IllegalStateException outside a batch listener annotated with {@link
   *     IdempotentListener}, or for an object that is not an element of its list
   */
  public static SendContext context(Object element) {
    Objects.requireNonNull(element, "element must not be null");
    Map<Object, SendContext> contexts = BATCH.get();
    SendContext context = contexts == null ? null : contexts.get(element);
    if (context == null) {
      throw new IllegalStateException(
          contexts == null
              ? "no idempotent batch on this thread: call IdempotentDelivery.context(element) from"
                  + " a batch listener annotated with @IdempotentListener"
              : "the object is not an element of the list this batch listener got");
    }
    return context;
  }

  /** Binds a record listener's context; returns what was bound before. */
  static SendContext bindRecord(SendContext context) {
    SendContext previous = RECORD.get();
    RECORD.set(context);
    return previous;
  }

  /** Restores what {@link #bindRecord} returned. */
  static void restoreRecord(SendContext previous) {
    if (previous == null) {
      RECORD.remove();
    } else {
      RECORD.set(previous);
    }
  }

  /** Binds a batch's contexts, by element identity; returns what was bound before. */
  static Map<Object, SendContext> bindBatch(IdentityHashMap<Object, SendContext> contexts) {
    Map<Object, SendContext> previous = BATCH.get();
    BATCH.set(contexts);
    return previous;
  }

  /** Restores what {@link #bindBatch} returned. */
  static void restoreBatch(Map<Object, SendContext> previous) {
    if (previous == null) {
      BATCH.remove();
    } else {
      BATCH.set(previous);
    }
  }
}
