package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyStoredFailureException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.amqp.AmqpRejectAndDontRequeueException;
import org.springframework.amqp.ImmediateRequeueAmqpException;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;

/**
 * The Spring AMQP side of {@link IdempotentListener}: an advice of the listener container (where
 * Spring AMQP's own retry interceptors sit), first in the chain, around each delivery of a message
 * or batch.
 *
 * <ul>
 *   <li>binds the delivered messages' headers to the thread, for header keys, as a delivery on the
 *       container's consumer thread (an interrupt a guarded send leaves on it is cleared: {@link
 *       ConsumerThreadInterrupts});
 *   <li>a deferred delivery (the key in flight elsewhere, the store down) waits the messaging
 *       backoff on the consumer's thread, counted per key in this process, and is then requeued
 *       with {@link ImmediateRequeueAmqpException}: whatever the container's retry or requeue
 *       settings, it comes back and is never dead-lettered for that reason;
 *   <li>a stored permanent failure that the listener does not acknowledge, and a message without a
 *       usable key ({@link InvalidIdempotencyKeyException}), are rejected with {@link
 *       AmqpRejectAndDontRequeueException}: the queue's dead-letter exchange takes them, if it has
 *       one;
 *   <li>every other failure goes on to the container unchanged.
 * </ul>
 */
final class RabbitDeliveryAdvice implements MethodInterceptor {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  private final DeferralCounter deferrals;

  RabbitDeliveryAdvice(DeliveryBackOff backOff) {
    this.deferrals = new DeferralCounter(backOff);
  }

  /**
   * An advice chain with this advice first, before the rest of {@code chain}, or {@code null} if
   * {@code chain} already has the starter's advice.
   */
  Advice @Nullable [] firstIn(Advice @Nullable [] chain) {
    if (has(chain)) {
      return null;
    }
    int length = chain == null ? 0 : chain.length;
    Advice[] withThis = new Advice[length + 1];
    withThis[0] = this;
    if (length > 0) {
      System.arraycopy(chain, 0, withThis, 1, length);
    }
    return withThis;
  }

  /**
   * Puts this advice first in a Spring AMQP container's advice chain unless the chain has the
   * starter's advice: after an application's {@code ContainerCustomizer} replaced the chain the
   * container got from its factory, and before the container is initialized (it reads its chain
   * then). The application's advice stays, after this one.
   */
  void includeIn(Object container) {
    if (container instanceof AbstractMessageListenerContainer rabbit) {
      Advice[] withThis = firstIn(chainOf(rabbit));
      if (withThis != null) {
        rabbit.setAdviceChain(withThis);
      }
    }
  }

  /** Whether a Spring AMQP container's advice chain has the starter's advice. */
  static boolean isIn(AbstractMessageListenerContainer container) {
    return has(chainOf(container));
  }

  private static boolean has(Advice @Nullable [] chain) {
    if (chain != null) {
      for (Advice advice : chain) {
        if (advice instanceof RabbitDeliveryAdvice) {
          return true;
        }
      }
    }
    return false;
  }

  private static Advice @Nullable [] chainOf(AbstractMessageListenerContainer container) {
    return (Advice[]) ListenerContainerHooks.current(container, "getAdviceChain", "adviceChain");
  }

  @Override
  public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
    Object[] arguments = invocation.getArguments();
    Object data = arguments.length > 1 ? arguments[1] : null;
    Delivery previous = Delivery.bind(delivery(data));
    try {
      return invocation.proceed();
    } catch (Throwable failure) {
      Throwable deferral = DeferredDeliveryException.deferralIn(failure);
      if (deferral != null) {
        Duration pause = deferrals.next(DeferredDeliveryException.backOffId(deferral));
        log.debug("Requeueing a deferred delivery after {} ms", pause.toMillis());
        try {
          Thread.sleep(pause.toMillis());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt(); // stopping: requeue at once
        }
        throw new ImmediateRequeueAmqpException(
            "deferred, requeued after " + pause.toMillis() + " ms", failure);
      }
      if (storedFailureIn(failure) || in(failure, InvalidIdempotencyKeyException.class)) {
        throw new AmqpRejectAndDontRequeueException(
            "no usable key, or the key failed permanently before; rejected without requeue",
            failure);
      }
      throw failure;
    } finally {
      Delivery.restore(previous);
    }
  }

  private static Delivery delivery(@Nullable Object data) {
    if (data instanceof Message message && isProducerBatch(message)) {
      // a producer's batch (BatchingRabbitTemplate) reaches this advice whole only on its way to a
      // batch listener, which gets it split into a list after it (a record listener's container
      // splits it first, and each part comes here without the header): a batch, whose parts carry
      // no headers of their own (the producer's batch keeps the first message's only)
      return new Delivery(List.of(), true, Delivery.WHOLE_BATCH, true);
    }
    if (data instanceof Message message) {
      return new Delivery(
          List.of(message.getMessageProperties().getHeaders()), false, Delivery.WHOLE_BATCH, true);
    }
    List<Map<String, Object>> headers = new ArrayList<>();
    if (data instanceof List<?> messages) {
      for (Object each : messages) {
        headers.add(
            each instanceof Message message
                ? message.getMessageProperties().getHeaders()
                : Map.of());
      }
    }
    return new Delivery(headers, true, Delivery.WHOLE_BATCH, true);
  }

  /** Whether {@code message} is a producer's batch that the container will split. */
  private static boolean isProducerBatch(Message message) {
    return message
        .getMessageProperties()
        .getHeaders()
        .containsKey(MessageProperties.SPRING_BATCH_FORMAT);
  }

  private static boolean storedFailureIn(Throwable failure) {
    return in(failure, IdempotencyStoredFailureException.class);
  }

  private static boolean in(Throwable failure, Class<? extends Throwable> type) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (type.isInstance(t)) {
        return true;
      }
    }
    return false;
  }
}
