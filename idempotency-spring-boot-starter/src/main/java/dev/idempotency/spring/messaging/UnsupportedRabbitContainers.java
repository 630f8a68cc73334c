package dev.idempotency.spring.messaging;

import dev.idempotency.spring.IdempotencyConfigurationException;
import dev.idempotency.spring.Idempotent;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.core.MessageListener;
import org.springframework.amqp.rabbit.annotation.RabbitHandler;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.HandlerAdapter;
import org.springframework.amqp.rabbit.listener.adapter.MessageListenerAdapter;
import org.springframework.amqp.rabbit.listener.adapter.MessagingMessageListenerAdapter;
import org.springframework.aop.support.AopUtils;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Refuses, before it starts, a Spring AMQP listener container whose listener method is guarded
 * ({@link IdempotentListener}, or {@link Idempotent} on the {@code @RabbitListener} method, or on
 * the method a {@code MessageListenerAdapter} calls) and that the starter cannot support safely:
 * the registry's containers and the listener containers that are beans alike. Used by {@link
 * ListenerContainerHooks}.
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
 *   <li>An advice chain without the starter's advice ({@link #requireAdvice}).
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
   * @param beanName the container's bean name, or {@code null} if it is not a bean (a registry's)
   * @throws IdempotencyConfigurationException naming the annotation, the method, the container,
   *     what is not supported and what to use instead
   */
  static void refuse(Object container, @Nullable String beanName) {
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
          guarded + " runs in " + describe(rabbit, beanName) + " with " + unsupported.problem(),
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
   * whose advice chain, as the container runs it ({@link RabbitDeliveryAdvice#isIn}), lacks the
   * starter's advice, first, and its last part, last (if the chain has other advices). Its header
   * keys would not be found, its poison messages would be requeued in a loop, a deferral would meet
   * the container's requeue settings ({@code defaultRequeueRejected = false} drops it), and an
   * advice of the application's outside the last part (a retry with a recoverer) would dead-letter
   * it. A registry's container lacks it when the application replaced its chain where the starter
   * could not put its advice back (a container factory it could not observe, whose class is final);
   * a container bean, when its listener was set, or the container initialized, before the starter
   * could compose its chain (before Spring initializes the bean).
   *
   * @param beanName the container's bean name, or {@code null} if it is not a bean (a registry's)
   * @throws IdempotencyConfigurationException naming the method, the container, the cause and the
   *     remedy
   */
  static void requireAdvice(Object container, @Nullable String beanName) {
    if (!(container instanceof AbstractMessageListenerContainer rabbit)
        || RabbitDeliveryAdvice.isIn(rabbit)) {
      return;
    }
    String guarded = guardedMethod(rabbit);
    if (guarded == null) {
      return;
    }
    if (beanName != null) {
      throw new IdempotencyConfigurationException(
          guarded
              + " runs in "
              + describe(rabbit, beanName)
              + ", which was initialized without the idempotency starter's advice first in its"
              + " advice chain (and its last part last), so header keys would not be found,"
              + " poison messages would be requeued in a loop, and a deferral (the store down:"
              + " nothing was sent) would meet the container's retry, recoverer and requeue"
              + " settings, to be dead-lettered or dropped.",
          "The starter composes the chain of a container bean before Spring initializes it, if"
              + " the bean's message listener is set by then: set the message listener in the"
              + " container's @Bean method, and do not call afterPropertiesSet(), initialize() or"
              + " start() there (Spring does); your advices stay in the chain, between the"
              + " starter's two parts");
    }
    throw new IdempotencyConfigurationException(
        guarded
            + " runs in "
            + describe(rabbit, null)
            + " whose advice chain lacks the idempotency starter's advice: the application"
            + " replaced the advice chain the container got from its factory (setAdviceChain,"
            + " in a ContainerCustomizer say), so header keys would not be found and poison"
            + " messages would be requeued in a loop (or, behind a retry, dead-lettered while"
            + " deferred).",
        "Keep the first element of the factory's advice chain (the starter's) first and its last"
            + " element (the starter's too) last when you set the container's, or add your advice"
            + " to the factory's chain instead");
  }

  /** How a refusal names a container: the registry's by its listener id, a bean by its name. */
  private static String describe(AbstractMessageListenerContainer rabbit, @Nullable String bean) {
    return bean == null
        ? "RabbitMQ listener container '" + rabbit.getListenerId() + "'"
        : "RabbitMQ listener container bean '" + bean + "'";
  }

  /**
   * The guarded listener method of a container, as {@code "@IdempotentListener on
   * com.example.Type.method(..)"}, or {@code null} if its listener is not a guarded method: a
   * {@code @RabbitListener} method's adapter, a {@code MessageListenerAdapter} (the methods of its
   * delegate it may call: its default listener method and those it maps queues to, or the
   * delegate's {@code onMessage} if the delegate is a {@code MessageListener}), or a {@code
   * MessageListener} itself (its {@code onMessage}).
   */
  static @Nullable String guardedMethod(AbstractMessageListenerContainer rabbit) {
    List<Guarded> guarded = guarded(rabbit);
    if (guarded.isEmpty()) {
      return null;
    }
    Guarded first = guarded.get(0);
    return first.guard()
        + " on "
        + ClassUtils.getUserClass(first.type()).getName()
        + "."
        + first.method().getName()
        + "(..)";
  }

  /** A guarded listener method, most specific, of its listener's type, and its guard. */
  private record Guarded(Method method, Class<?> type, String guard) {}

  /**
   * The guarded listener methods a container may call (as {@link #guardedMethod} finds them, most
   * specific first), none if its listener is not a guarded method.
   */
  static List<Method> guardedMethods(AbstractMessageListenerContainer rabbit) {
    return guarded(rabbit).stream().map(Guarded::method).toList();
  }

  private static List<Guarded> guarded(AbstractMessageListenerContainer rabbit) {
    Object listener = rabbit.getMessageListener();
    if (listener == null) {
      return List.of();
    }
    HandlerAdapter handler = handlerOf(listener);
    if (handler != null) {
      Class<?> type = AopUtils.getTargetClass(handler.getBean());
      @Nullable Method method;
      try {
        method = handler.getMethodFor(null);
      } catch (RuntimeException classLevelListener) {
        // @RabbitHandler methods: chosen by payload type; look at them all, whatever their
        // visibility, as Spring AMQP finds them (its bean post-processor's user-declared methods)
        return guardedAmong(Arrays.asList(declaredMethodsOf(type)), type, true);
      }
      return guardedAmong(Collections.singletonList(method), type, false);
    }
    if (listener instanceof MessageListenerAdapter adapter) {
      Object delegate = ListenerContainerHooks.current(adapter, "getDelegate", "delegate");
      if (delegate == null) {
        return List.of();
      }
      Set<String> names = new HashSet<>();
      if (delegate != adapter && delegate instanceof MessageListener) {
        names.add("onMessage"); // the adapter passes the message through
      } else {
        names.add(
            String.valueOf(
                ListenerContainerHooks.current(
                    adapter, "getDefaultListenerMethod", "defaultListenerMethod")));
        if (ListenerContainerHooks.current(
                adapter, "getQueueOrTagToMethodName", "queueOrTagToMethodName")
            instanceof Map<?, ?> mapped) {
          mapped.values().forEach(name -> names.add(String.valueOf(name)));
        }
      }
      return methodsNamed(delegate, names);
    }
    return methodsNamed(listener, Set.of("onMessage", "onMessageBatch"));
  }

  /** The methods of {@code listener} with one of {@code names} that are guarded. */
  private static List<Guarded> methodsNamed(Object listener, Set<String> names) {
    Class<?> type = AopUtils.getTargetClass(listener);
    List<@Nullable Method> candidates = new ArrayList<>();
    for (Method method : declaredMethodsOf(type)) {
      if (names.contains(method.getName())) {
        candidates.add(method);
      }
    }
    return guardedAmong(candidates, type, false);
  }

  /**
   * The methods of {@code type} and its superclasses, whatever their visibility, each once (an
   * override hides the method it overrides), without the compiler's bridges and synthetic methods:
   * Spring AMQP calls a {@code @RabbitHandler} (and a {@code MessageListenerAdapter} its delegate's
   * method) that is not public too.
   */
  private static Method[] declaredMethodsOf(Class<?> type) {
    return ReflectionUtils.getUniqueDeclaredMethods(type, ReflectionUtils.USER_DECLARED_METHODS);
  }

  /** The most specific of {@code candidates}, methods of {@code type}, that are guarded. */
  private static List<Guarded> guardedAmong(
      List<@Nullable Method> candidates, Class<?> type, boolean classLevel) {
    List<Guarded> guarded = new ArrayList<>();
    for (Method method : candidates) {
      if (method == null) {
        continue;
      }
      Method specific = AopUtils.getMostSpecificMethod(method, type);
      String guard = specific == null ? null : guardOf(specific, classLevel);
      if (guard != null) {
        guarded.add(new Guarded(specific, type, guard));
      }
    }
    return guarded;
  }

  /** The adapter of an annotated listener method's listener, or {@code null}. */
  static @Nullable HandlerAdapter handlerOf(Object listener) {
    Method getter = ReflectionUtils.findMethod(listener.getClass(), "getHandlerAdapter");
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
