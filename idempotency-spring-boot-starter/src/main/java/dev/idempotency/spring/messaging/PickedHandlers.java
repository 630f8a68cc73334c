package dev.idempotency.spring.messaging;

import java.lang.reflect.Method;
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
 * RabbitProducerBatchParts#partsRuleOf}). Only the first guarded method called during the delivery
 * is checked (the one the framework picked, or one an unguarded handler calls, which is no
 * handler).
 *
 * <p>For the starter's integrations. Thread-safe: one check per thread.
 */
public final class PickedHandlers {

  private static final ThreadLocal<@Nullable Consumer<Method>> CHECK = new ThreadLocal<>();

  private PickedHandlers() {}

  /**
   * Binds {@code check} to this thread, and returns the check bound before, for {@link #restore}.
   */
  static @Nullable Consumer<Method> bind(@Nullable Consumer<Method> check) {
    Consumer<Method> previous = CHECK.get();
    CHECK.set(check);
    return previous;
  }

  /** Binds {@code previous} back, as {@link #bind} returned it. */
  static void restore(@Nullable Consumer<Method> previous) {
    if (previous == null) {
      CHECK.remove();
    } else {
      CHECK.set(previous);
    }
  }

  /**
   * Runs the check bound to this thread, if any, on a guarded listener method about to run, and
   * unbinds it.
   *
   * @param method the method invoked (a proxy's or an interface's is made the target's)
   * @param targetClass the class of the bean it is invoked on
   * @throws RuntimeException what the check throws: the delivery must not reach this method
   */
  public static void check(Method method, Class<?> targetClass) {
    Consumer<Method> check = CHECK.get();
    if (check != null) {
      CHECK.remove();
      check.accept(AopUtils.getMostSpecificMethod(method, targetClass));
    }
  }
}
