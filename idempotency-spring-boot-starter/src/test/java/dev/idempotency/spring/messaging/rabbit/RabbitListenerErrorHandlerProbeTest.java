package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.Channel;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.AmqpRejectAndDontRequeueException;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.api.RabbitListenerErrorHandler;
import org.springframework.amqp.rabbit.support.ListenerExecutionFailedException;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * probeU (fixrabbit; SPEC 1, SPEC 15): the application's {@code RabbitListenerErrorHandler} on the
 * {@code @RabbitListener} (its {@code errorHandler} attribute) sits inside the listener adapter,
 * inside every advice of the container, so inside the starter's deferral catcher ({@code
 * RabbitDeliveryAdvice.LAST}) too. It used to see a deferral (here the store is down: nothing was
 * sent) as the listener's failure before any part of the starter did: one that logs and returns
 * (the usual "do not requeue a failing message in a loop" handler) swallowed it, the adapter
 * acknowledged the delivery, and the message was gone without its send (severity medium, a lost
 * send; failed on dc550c5 on Boot 3.5 and 4.0: "timed out after 30000 ms waiting for the deferred
 * delivery's run"). The starter now wraps the endpoint's error handler ({@code
 * RabbitErrorHandlers}): a deferral passes it untouched and is requeued; the listener's own failure
 * still reaches it. One that rejects with {@code AmqpRejectAndDontRequeueException(cause)} was fine
 * before too (the deferral stayed in the cause chain). On the shared rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitListenerErrorHandlerProbeTest.App.class,
    properties =
        RabbitDeferralFixture.QUEUE_PROPERTY
            + "="
            + RabbitListenerErrorHandlerProbeTest.SWALLOW_QUEUE)
class RabbitListenerErrorHandlerProbeTest extends RabbitDeferralFixture {

  static final String SWALLOW_QUEUE = "idem.error-handler.swallow";
  static final String REJECT_QUEUE = "idem.error-handler.reject";

  /** The payloads the application's error handlers were called for. */
  static final List<String> handled = new CopyOnWriteArrayList<>();

  public static class KeyedListeners {
    @RabbitListener(
        id = "rabbit-error-handler-swallow",
        queues = SWALLOW_QUEUE,
        errorHandler = "loggingErrorHandler")
    @IdempotentListener(name = "rabbit-error-handler-swallow", key = "#event")
    public void onSwallowed(String event) {
      run(event);
    }

    @RabbitListener(
        id = "rabbit-error-handler-reject",
        queues = REJECT_QUEUE,
        errorHandler = "rejectingErrorHandler")
    @IdempotentListener(name = "rabbit-error-handler-reject", key = "#event")
    public void onRejected(String event) {
      run(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @Import(Application.class)
  static class App {
    @Bean
    KeyedListeners keyedListeners() {
      return new KeyedListeners();
    }

    /** The second listener's queue; {@link Application} declares the first's. */
    @Bean
    Declarables rejectQueues() {
      return queues(REJECT_QUEUE);
    }

    /** Logs the failure and returns: the message is acknowledged, never requeued in a loop. */
    @Bean
    RabbitListenerErrorHandler loggingErrorHandler() {
      return (Message amqpMessage,
          Channel channel,
          org.springframework.messaging.Message<?> message,
          ListenerExecutionFailedException exception) -> {
        handled.add(new String(amqpMessage.getBody(), StandardCharsets.UTF_8));
        return null;
      };
    }

    /** Rejects the failing message without requeue, keeping the failure as the cause. */
    @Bean
    RabbitListenerErrorHandler rejectingErrorHandler() {
      return (Message amqpMessage,
          Channel channel,
          org.springframework.messaging.Message<?> message,
          ListenerExecutionFailedException exception) -> {
        handled.add(new String(amqpMessage.getBody(), StandardCharsets.UTF_8));
        throw new AmqpRejectAndDontRequeueException("rejected by the application", exception);
      };
    }

    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> shortReceiveTimeout() {
      return container -> container.setReceiveTimeout(100L);
    }
  }

  @Test
  void aDeferralPassesAnErrorHandlerThatSwallowsFailuresAndIsSentLater() throws Exception {
    deferredPastTheErrorHandlerThenSentOnce();
  }

  @Test
  void aDeferralPassesAnErrorHandlerThatRejectsAndIsSentLater() throws Exception {
    queue = REJECT_QUEUE;
    deferredPastTheErrorHandlerThenSentOnce();
  }

  /** The other side: a send that failed (the store answers) reaches the application's handler. */
  @Test
  void aFailedSendStillReachesTheApplicationsErrorHandler() throws Exception {
    assertFailedSendHandledBy("the application's error handler", () -> List.copyOf(handled));
  }

  /**
   * While the store is down the delivery is requeued, never handed to the application's error
   * handler; once the store answers it runs, once.
   */
  private void deferredPastTheErrorHandlerThenSentOnce() throws Exception {
    String event = assertDeferredThenSentOnce();
    assertThat(handled).as("payloads the application's error handler saw").doesNotContain(event);
  }
}
