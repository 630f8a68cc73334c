package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.DeferredDeliveryException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.listener.ConditionalRejectingErrorHandler;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.support.ListenerExecutionFailedException;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * probeU (fixrabbit; SPEC 1, SPEC 15): the application sets the container's {@code ErrorHandler} to
 * Spring AMQP's {@code ConditionalRejectingErrorHandler} with a {@code FatalExceptionStrategy} that
 * treats every listener failure as fatal ("never requeue a failing message in a loop"). The
 * container used to call it with the starter's {@code ImmediateRequeueAmqpException} (a deferral:
 * the store is down, nothing was sent); it wrapped it in {@code AmqpRejectAndDontRequeueException},
 * {@code ContainerUtils.shouldRequeue} met the reject first in the cause chain, and the delivery
 * was rejected without requeue (dropped here, dead-lettered with a DLX) without its send (severity
 * medium, a lost send; failed on dc550c5 on Boot 3.5 and 4.0: "timed out after 30000 ms waiting for
 * the deferred delivery's run"). SPEC 15: a deferral "comes back and is never dead-lettered for
 * that reason", "whatever the container's retry or requeue settings". The starter now wraps the
 * container's error handler ({@code RabbitErrorHandlers}): it is not called for a deferral, which
 * is requeued; the listener's own failure still reaches it. On the shared rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitContainerErrorHandlerProbeTest.App.class,
    properties = RabbitDeferralFixture.QUEUE_PROPERTY + "=idem.container-error-handler")
class RabbitContainerErrorHandlerProbeTest extends RabbitDeferralFixture {

  /** What the application's error handler judged fatal: every failure it was called for. */
  static final List<Throwable> judgedFatal = new CopyOnWriteArrayList<>();

  @SpringBootConfiguration(proxyBeanMethods = false)
  @Import(KeyedApplication.class)
  static class App {
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> everyFailureIsFatal() {
      return container -> {
        container.setReceiveTimeout(100L);
        container.setErrorHandler(
            new ConditionalRejectingErrorHandler(
                t -> {
                  judgedFatal.add(t);
                  return true;
                }));
      };
    }
  }

  @Test
  void aDeferralIsNotRejectedByTheContainersErrorHandler() throws Exception {
    assertDeferredThenSentOnce();
    assertThat(judgedFatal)
        .as("failures the application's error handler saw")
        .noneMatch(t -> DeferredDeliveryException.deferralIn(t) != null);
  }

  /** The other side: a send that failed (the store answers) reaches the container's handler. */
  @Test
  void aFailedSendStillReachesTheContainersErrorHandler() throws Exception {
    assertFailedSendHandledBy(
        "the container's error handler",
        () -> judgedFatal.stream().map(RabbitContainerErrorHandlerProbeTest::payload).toList());
  }

  private static String payload(Throwable failure) {
    return failure instanceof ListenerExecutionFailedException failed
            && failed.getFailedMessage() != null
        ? new String(failed.getFailedMessage().getBody(), StandardCharsets.UTF_8)
        : String.valueOf(failure);
  }
}
