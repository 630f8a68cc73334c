package dev.idempotency.spring.messaging;

import java.lang.reflect.Method;
import java.util.Set;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.support.AopUtils;

/**
 * A check that a broker's hook binds to the consumer thread around one delivery, for the guarded
 * listener method that the broker's framework then picks for it: the guard of that method ({@link
 * IdempotentListener}, or {@code @Idempotent} on it) runs it right before the method runs, before
 * its key is read. Spring AMQP picks a class-level {@code @RabbitListener}'s {@code @RabbitHandler}
 * by the type of the converted payload, inside its listener adapter, after the container's advices
 * ran: what depends on the handler is decided there ({@link RabbitDeliveryAdvice}, {@link
 * RabbitProducerBatchParts#partsRuleOf}). Only a method among the check's handlers runs it: a
 * guarded method called before the handler (by an application's advice, argument resolver or
 * converter) or by an unguarded handler is no handler, and leaves the check bound for the handler.
 *
 * <p>For the starter's integrations. Thread-safe: one check per thread.
 */
public final class PickedHandlers {

  private static final ThreadLocal<@Nullable Check> CHECK = new ThreadLocal<>();

  private PickedHandlers() {}

  /**
   * A check of the handler the framework picks for one delivery.
   *
   * @param handlers the guarded listener methods the framework may pick (most specific)
   * @param onPicked what runs for the one picked, before it runs
   */
  record Check(Set<Method> handlers, Consumer<Method> onPicked) {}

  /**
   * Binds {@code check} to this thread, and returns the check bound before, for {@link #restore}.
   */
  static @Nullable Check bind(@Nullable Check check) {
    Check previous = CHECK.get();
    CHECK.set(check);
    return previous;
  }

  /** Binds {@code previous} back, as {@link #bind} returned it. */
  static void restore(@Nullable Check previous) {
    if (previous == null) {
      CHECK.remove();
    } else {
      CHECK.set(previous);
    }
  }

  /**
   * Runs the check bound to this thread, if any and if {@code method} is one of its handlers, on a
   * guarded listener method about to run, and unbinds it.
   *
   * @param method the method invoked (a proxy's or an interface's is made the target's)
   * @param targetClass the class of the bean it is invoked on
   * @throws RuntimeException what the check throws: the delivery must not reach this method
   */
  public static void check(Method method, Class<?> targetClass) {
    Check check = CHECK.get();
    if (check == null) {
      return;
    }
    Method specific = AopUtils.getMostSpecificMethod(method, targetClass);
    if (!check.handlers().contains(specific)) {
      return; // not the handler picked: a guarded call before it, or from an unguarded one
    }
    CHECK.remove();
    check.onPicked().accept(specific);
  }
}
