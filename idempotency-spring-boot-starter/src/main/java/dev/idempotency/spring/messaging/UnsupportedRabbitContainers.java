package dev.idempotency.spring.messaging;

import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.rabbit.annotation.RabbitHandler;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.HandlerAdapter;
import org.springframework.amqp.rabbit.listener.adapter.MessagingMessageListenerAdapter;
import org.springframework.aop.support.AopUtils;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Refuses, before it starts, a Spring AMQP listener container whose listener method is guarded
 * ({@link IdempotentListener}, or {@link Idempotent} on the {@code @RabbitListener} method) and
 * that the starter cannot support safely. Used by {@link ListenerContainerHooks}.
 *
 * <ul>
 *   <li>{@code MANUAL} acknowledgement: a replay does not run the listener, so nothing would
 *       acknowledge the message, and the consumer would stall once its prefetch filled.
 *   <li>A transacted channel ({@code channelTransacted}, which a {@code RabbitTransactionManager}
 *       implies): Spring AMQP commits the channel after the listener returned, with nothing the
 *       starter can wait on, so an outcome would be recorded before a commit that may fail, and the
 *       redelivery acknowledged as a replay.
 *   <li>{@code returnExceptions = true} on the {@code @RabbitListener}: the listener adapter
 *       catches what the listener throws, a deferral too, before the starter's advice can requeue
 *       it, and sends it as the reply; the request is acknowledged and never runs.
 *   <li>An advice chain without the starter's advice ({@link #requireAdvice}), checked before the
 *       registry's containers start.
 * </ul>
 */
final class UnsupportedRabbitContainers {

  /** What is not supported and why, then what to do instead. */
  private record Unsupported(String problem, String action) {}

  private static final Unsupported MANUAL_ACKNOWLEDGEMENT =
      new Unsupported(
          "MANUAL acknowledgement, which is not supported: a replay does not run the listener, so"
              + " nothing would acknowledge it and the consumer would stall once its prefetch"
              + " filled.",
          "Use AUTO acknowledgement (the default; the starter acknowledges replays"
              + " and rejects poison messages itself)");

  private static final Unsupported TRANSACTED_CHANNEL =
      new Unsupported(
          "a transacted channel (channelTransacted, or a RabbitTransactionManager), which is not"
              + " supported: Spring AMQP commits the channel after the listener returned, with"
              + " nothing the starter can wait on, so an outcome would be recorded before a commit"
              + " that may fail, and the redelivery acknowledged as a replay.",
          "Use a channel that is not transacted (the default) for this listener's container");

  private static final Unsupported RETURN_EXCEPTIONS =
      new Unsupported(
          "returnExceptions = true, which is not supported: Spring AMQP would send a deferral (the"
              + " store down, or the key in flight elsewhere: nothing was sent) as the reply and"
              + " acknowledge the request, which would never run.",
          "Remove returnExceptions from this"
              + " listener: a deferred request is then requeued and answered once it ran (a caller"
              + " waiting on the reply may time out first, and must then send again)");

  private UnsupportedRabbitContainers() {}

  /**
   * Refuses {@code container} if it is a Spring AMQP container the starter cannot support and its
   * listener method is guarded.
   *
   * @throws IllegalStateException naming the annotation, the method, the container, what is not
   *     supported and what to use instead
   */
  static void refuse(Object container) {
    if (!(container instanceof AbstractMessageListenerContainer rabbit)) {
      return;
    }
    Unsupported unsupported;
    if (rabbit.getAcknowledgeMode().isManual()) {
      unsupported = MANUAL_ACKNOWLEDGEMENT;
    } else if (rabbit.isChannelTransacted()) {
      unsupported = TRANSACTED_CHANNEL;
    } else if (returnsExceptions(rabbit.getMessageListener())) {
      unsupported = RETURN_EXCEPTIONS;
    } else {
      return;
    }
    String guarded = guardedMethod(rabbit);
    if (guarded != null) {
      throw new IdempotencyConfigurationException(
          guarded
              + " runs in RabbitMQ listener container '"
              + rabbit.getListenerId()
              + "' with "
              + unsupported.problem(),
          unsupported.action());
    }
  }

  /**
   * Whether a listener is a {@code @RabbitListener} method's adapter with {@code returnExceptions =
   * true} (read from its field: Spring AMQP has no getter).
   */
  private static boolean returnsExceptions(@Nullable Object listener) {
    return listener instanceof MessagingMessageListenerAdapter adapter
        && Boolean.TRUE.equals(
            ListenerContainerHooks.current(adapter, "isReturnExceptions", "returnExceptions"));
  }

  /**
   * Refuses {@code container} if it is a Spring AMQP container whose listener method is guarded and
   * whose advice chain lacks the starter's advice, first, and its last part, last (if the chain has
   * other advices): the application replaced the container's chain where the starter could not put
   * its advice back (a container factory it could not observe, whose class is final). Its header
   * keys would not be found, its poison messages would be requeued in a loop, and an advice of the
   * application's outside the last part (a retry with a recoverer) would dead-letter a deferral.
   *
   * @throws IllegalStateException naming the method, the container, the cause and the remedy
   */
  static void requireAdvice(Object container) {
    if (!(container instanceof AbstractMessageListenerContainer rabbit)
        || RabbitDeliveryAdvice.isIn(rabbit)) {
      return;
    }
    String guarded = guardedMethod(rabbit);
    if (guarded != null) {
      throw new IdempotencyConfigurationException(
          guarded
              + " runs in RabbitMQ listener container '"
              + rabbit.getListenerId()
              + "' whose advice chain lacks the idempotency starter's advice: the application"
              + " replaced the advice chain the container got from its factory (setAdviceChain,"
              + " in a ContainerCustomizer say), so header keys would not be found and poison"
              + " messages would be requeued in a loop (or, behind a retry, dead-lettered while"
              + " deferred).",
          "Keep the first element of the factory's advice chain (the"
              + " starter's) first and its last element (the starter's too) last when you set"
              + " the container's, or add your advice to the factory's chain instead");
    }
  }

  /**
   * The guarded listener method of a container, as {@code "@IdempotentListener on
   * com.example.Type.method(..)"}, or {@code null} if its listener is not a guarded method.
   */
  private static @Nullable String guardedMethod(AbstractMessageListenerContainer rabbit) {
    HandlerAdapter handler = handlerOf(rabbit.getMessageListener());
    if (handler == null) {
      return null; // not an annotated listener method
    }
    Class<?> type = AopUtils.getTargetClass(handler.getBean());
    List<Method> candidates = new ArrayList<>();
    boolean classLevel = false;
    try {
      candidates.add(handler.getMethodFor(null));
    } catch (RuntimeException classLevelListener) {
      // @RabbitHandler methods: chosen by payload type; look at them all
      classLevel = true;
      candidates.addAll(Arrays.asList(type.getMethods()));
    }
    for (Method method : candidates) {
      Method specific = AopUtils.getMostSpecificMethod(method, type);
      String guard = specific == null ? null : guardOf(specific, classLevel);
      if (guard != null) {
        return guard
            + " on "
            + ClassUtils.getUserClass(type).getName()
            + "."
            + specific.getName()
            + "(..)";
      }
    }
    return null;
  }

  /** The adapter of an annotated listener method's listener, or {@code null}. */
  private static @Nullable HandlerAdapter handlerOf(@Nullable Object listener) {
    Method getter =
        listener == null
            ? null
            : ReflectionUtils.findMethod(listener.getClass(), "getHandlerAdapter");
    if (getter == null) {
      return null;
    }
    ReflectionUtils.makeAccessible(getter);
    return ReflectionUtils.invokeMethod(getter, listener) instanceof HandlerAdapter handler
        ? handler
        : null;
  }

  /**
   * The annotation that guards a listener method, or {@code null}: {@link Idempotent} counts on a
   * class-level listener only on its {@code @RabbitHandler} methods (its other public methods are
   * not called by the container).
   */
  private static @Nullable String guardOf(Method method, boolean classLevel) {
    if (AnnotatedElementUtils.hasAnnotation(method, IdempotentListener.class)) {
      return "@IdempotentListener";
    }
    if (AnnotatedElementUtils.hasAnnotation(method, Idempotent.class)
        && (!classLevel || AnnotatedElementUtils.hasAnnotation(method, RabbitHandler.class))) {
      return "@Idempotent";
    }
    return null;
  }
}
