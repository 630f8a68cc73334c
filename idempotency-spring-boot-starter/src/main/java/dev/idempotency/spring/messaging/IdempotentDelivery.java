package dev.idempotency.spring.messaging;

import dev.idempotency.SendContext;
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
 * <p>Bound to the thread that runs the listener, while it runs: {@link #context()} and {@link
 * #context(Object)} answer on that thread only, and throw an {@link IllegalStateException} on any
 * other (a parallel stream's worker, an executor's thread). To send from other threads, take each
 * message's context on the listener's thread, hand it on with the message (a {@link SendContext} is
 * immutable and thread-safe), and wait for those threads before the listener returns:
 *
 * <pre>{@code
 * @KafkaListener(topics = "order-shipped", batch = "true")
 * @IdempotentListener(key = "orderId")
 * void onShipped(List<OrderShipped> events) {
 *   List<CompletableFuture<Void>> sends = new ArrayList<>();
 *   for (OrderShipped event : events) {
 *     SendContext context = IdempotentDelivery.context(event); // on the listener's thread
 *     sends.add(CompletableFuture.runAsync(
 *         () -> mail.send(event.email(), "shipped", context.providerKey()), executor));
 *   }
 *   CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).join();
 * }
 * }</pre>
 */
public final class IdempotentDelivery {

  private static final ThreadLocal<SendContext> RECORD = new ThreadLocal<>();
  private static final ThreadLocal<BatchContexts> BATCH = new ThreadLocal<>();

  private IdempotentDelivery() {}

  /**
   * The context of the delivery a record listener is handling.
   *
   * @return the context
   * @throws IllegalStateException outside a record listener annotated with {@link
   *     IdempotentListener}, or on another thread than the one that runs it
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
   * <p>The element is found by identity, so each message must be its own object. A deserializer may
   * hand two messages one shared object (Kafka's {@code IntegerDeserializer} returns one cached
   * {@code Integer} for equal small values; a {@code String} may be interned): this method cannot
   * tell such messages apart, and for that object it throws an {@link IllegalStateException} rather
   * than give one message the other's provider key (a provider that deduplicates by it would drop a
   * message). The refusal is logged at WARN once per batch, with the listener's name. Take {@code
   * List<ConsumerRecord<K, V>>} or {@code List<Message<?>>} elements, each its own object, and pass
   * the record or message here.
   *
   * @param element an element of the list the listener got (the same object)
   * @return the context
   * @throws IllegalStateException outside a batch listener annotated with {@link
   *     IdempotentListener} or on another thread than the one that runs it, for an object that is
   *     not an element of its list, or for an object that is two elements of its list
   */
  public static SendContext context(Object element) {
    Objects.requireNonNull(element, "element must not be null");
    BatchContexts contexts = BATCH.get();
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
  static BatchContexts bindBatch(BatchContexts contexts) {
    BatchContexts previous = BATCH.get();
    BATCH.set(contexts);
    return previous;
  }

  /** Restores what {@link #bindBatch} returned. */
  static void restoreBatch(BatchContexts previous) {
    if (previous == null) {
      BATCH.remove();
    } else {
      BATCH.set(previous);
    }
  }
}
