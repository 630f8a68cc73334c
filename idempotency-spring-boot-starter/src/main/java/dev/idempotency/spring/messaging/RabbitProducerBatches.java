package dev.idempotency.spring.messaging;

import dev.idempotency.spring.ExpressionAttributes;
import dev.idempotency.spring.IdempotencyConfigurationException;
import java.lang.reflect.Method;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.BatchMessagingMessageListenerAdapter;
import org.springframework.amqp.rabbit.listener.adapter.HandlerAdapter;
import org.springframework.aop.support.AopUtils;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.Expression;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Refuses, before it starts, a Spring AMQP container that would hand a header-keyed {@link
 * IdempotentListener} batch listener the batches a producer made ({@code BatchingRabbitTemplate}):
 * a batch listener without consumer-side batching, whose container splits a producer's batch into
 * the listener's list. Spring AMQP's {@code SimpleBatchingStrategy} keeps the first message's
 * headers only, so the other messages' keys never reach the consumer: the starter would reject
 * every such batch unsent (a missing key: dead-lettered, or dropped without a dead-letter
 * exchange). A key read from the payload is each message's own, and works. Used by {@link
 * ListenerContainerHooks}.
 */
final class RabbitProducerBatches {

  private RabbitProducerBatches() {}

  /**
   * Refuses {@code container} if it is a Spring AMQP batch listener's container without consumer
   * batching whose {@link IdempotentListener} method reads its key from the headers ({@code
   * header}, the default header, or {@code #headers} in {@code key}). Such a listener gets a list
   * only from a producer's batch (the factory turns the container's de-batching off and the
   * listener's adapter splits the batch; with de-batching on, each part would come alone with the
   * first message's headers), so it is refused whatever its de-batching. Every guarded listener's
   * Spring AMQP container first gets its batching strategy wrapped ({@link
   * RabbitProducerBatchParts#markIn}), so that a record or consumer-side batch listener reads no
   * header key from the parts of a producer's batch after the first.
   *
   * @throws IdempotencyConfigurationException naming the method, the container and what to do
   */
  static void refuseHeaderKeys(Object container) {
    RabbitProducerBatchParts.markIn(container); // a record or consumer-batch listener's parts
    if (!(container instanceof AbstractMessageListenerContainer rabbit)
        || !(rabbit.getMessageListener() instanceof BatchMessagingMessageListenerAdapter adapter)
        || rabbit.isConsumerBatchEnabled()) {
      return;
    }
    Method method = listenerMethod(adapter);
    if (method == null) {
      return;
    }
    IdempotentListener annotation =
        AnnotatedElementUtils.findMergedAnnotation(method, IdempotentListener.class);
    if (annotation == null || !readsHeaders(annotation)) {
      return;
    }
    throw new IdempotencyConfigurationException(
        "@IdempotentListener on "
            + ClassUtils.getUserClass(method.getDeclaringClass()).getName()
            + "."
            + method.getName()
            + "(..) reads its key from a message header, and runs in RabbitMQ listener container '"
            + rabbit.getListenerId()
            + "', a batch listener without consumer batching: its list is a batch a producer"
            + " made (BatchingRabbitTemplate), which keeps the first message's headers only, so"
            + " the other messages' keys never arrive and every such batch would be rejected"
            + " unsent (dead-lettered, or dropped without a dead-letter exchange).",
        "Key this listener by its payload (key = \"#payload\", or an expression over each"
            + " message's payload such as \"orderId\"), which every message of a producer's"
            + " batch keeps. A header key works where each message arrives as its own AMQP"
            + " message: producers that do not batch, consumed by a record listener or with"
            + " consumer-side batching (consumerBatchEnabled = true).");
  }

  /** The {@code @RabbitListener} method of a batch listener's adapter, or {@code null}. */
  private static @Nullable Method listenerMethod(BatchMessagingMessageListenerAdapter adapter) {
    Method getter = ReflectionUtils.findMethod(adapter.getClass(), "getHandlerAdapter");
    if (getter == null) {
      return null;
    }
    ReflectionUtils.makeAccessible(getter);
    if (!(ReflectionUtils.invokeMethod(getter, adapter) instanceof HandlerAdapter handler)) {
      return null;
    }
    Method method;
    try {
      method = handler.getMethodFor(null);
    } catch (RuntimeException classLevelListener) {
      return null; // @RabbitHandler methods: not a batch listener's shape
    }
    return method == null
        ? null
        : AopUtils.getMostSpecificMethod(method, AopUtils.getTargetClass(handler.getBean()));
  }

  /** Whether the listener's key is read from the headers: a header, or #headers in its key. */
  private static boolean readsHeaders(IdempotentListener annotation) {
    if (annotation.key().isEmpty()) {
      return true;
    }
    boolean[] headers = {false};
    try {
      Expression key = ExpressionAttributes.parser().parseExpression(annotation.key());
      ExpressionAttributes.checkVariables(
          "",
          "key",
          annotation.key(),
          key,
          variable -> {
            headers[0] |= variable.equals("headers");
            return null;
          });
    } catch (RuntimeException invalid) {
      return false; // refused when the listener method is checked
    }
    return headers[0];
  }
}
