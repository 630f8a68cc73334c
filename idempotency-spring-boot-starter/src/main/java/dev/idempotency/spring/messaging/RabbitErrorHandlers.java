package dev.idempotency.spring.messaging;

import com.rabbitmq.client.Channel;
import org.jspecify.annotations.Nullable;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.MethodRabbitListenerEndpoint;
import org.springframework.amqp.rabbit.listener.api.RabbitListenerErrorHandler;
import org.springframework.amqp.rabbit.support.ListenerExecutionFailedException;
import org.springframework.util.ErrorHandler;

/**
 * Keeps a deferral ({@link DeferredDeliveryException#deferralIn}) from the application's two Spring
 * AMQP error handlers, which would otherwise decide its fate before or after the starter's advice
 * ({@link RabbitDeliveryAdvice}) requeues it; every other failure reaches them unchanged. Used by
 * {@link ListenerContainerHooks}.
 *
 * <ul>
 *   <li>The {@code RabbitListenerErrorHandler} of a {@code @RabbitListener(errorHandler = ...)}
 *       runs inside the listener adapter, so inside the whole advice chain: one that returns would
 *       have the delivery acknowledged without its send. Wrapped on the endpoint before the factory
 *       builds the adapter (the adapter keeps it in a final field), it rethrows a deferral as the
 *       adapter does without an error handler, and the starter's advice requeues it (a producer
 *       batch's part that a class-level listener's guarded handler refused passes it too, and is
 *       rejected).
 *   <li>The container's {@code ErrorHandler} (Spring AMQP's default is a {@code
 *       ConditionalRejectingErrorHandler}) sees what leaves the advice chain, the starter's {@code
 *       ImmediateRequeueAmqpException} for a deferral: one that judges every failure fatal would
 *       wrap it in a reject without requeue. Wrapped, it is not called for a deferral, and the
 *       container rethrows the requeue as it does after any error handler that returned.
 * </ul>
 *
 * Wrapping twice changes nothing.
 */
final class RabbitErrorHandlers {

  private RabbitErrorHandlers() {}

  /**
   * Wraps the {@code RabbitListenerErrorHandler} of a Spring AMQP method endpoint, if it has one,
   * before a factory creates its listener from it.
   */
  static void passDeferralsIn(Object endpoint) {
    if (endpoint instanceof MethodRabbitListenerEndpoint method
        && ListenerContainerHooks.current(method, "getErrorHandler", "errorHandler")
            instanceof RabbitListenerErrorHandler handler
        && !(handler instanceof ListenerErrorHandler)) {
      method.setErrorHandler(new ListenerErrorHandler(handler));
    }
  }

  /** Wraps the error handler of a Spring AMQP listener container, if it has one. */
  static void passDeferralsOf(Object container) {
    if (container instanceof AbstractMessageListenerContainer rabbit
        && rabbit.getErrorHandler() != null
        && !(rabbit.getErrorHandler() instanceof ContainerErrorHandler)) {
      rabbit.setErrorHandler(new ContainerErrorHandler(rabbit.getErrorHandler()));
    }
  }

  /**
   * The application's listener error handler, which a deferral, and a producer batch's part that
   * the guarded handler refused ({@link RabbitProducerBatchParts.RejectedPart}), pass untouched.
   */
  private record ListenerErrorHandler(RabbitListenerErrorHandler application)
      implements RabbitListenerErrorHandler {
    @Override
    public @Nullable Object handleError(
        Message amqpMessage,
        Channel channel,
        org.springframework.messaging.@Nullable Message<?> message,
        ListenerExecutionFailedException exception)
        throws Exception {
      if (DeferredDeliveryException.deferralIn(exception) != null
          || RabbitProducerBatchParts.rejectionIn(exception) != null) {
        throw exception;
      }
      return application.handleError(amqpMessage, channel, message, exception);
    }
  }

  /** The container's error handler, which is not called for a deferral. */
  private record ContainerErrorHandler(ErrorHandler application) implements ErrorHandler {
    @Override
    public void handleError(Throwable failure) {
      if (DeferredDeliveryException.deferralIn(failure) == null) {
        application.handleError(failure);
      }
    }
  }
}
