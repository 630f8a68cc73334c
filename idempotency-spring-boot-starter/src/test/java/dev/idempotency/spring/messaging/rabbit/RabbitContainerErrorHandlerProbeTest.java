package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.DeferredDeliveryException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.listener.ConditionalRejectingErrorHandler;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.support.ListenerExecutionFailedException;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

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
@SpringBootTest(classes = RabbitContainerErrorHandlerProbeTest.App.class)
@DirtiesContext
class RabbitContainerErrorHandlerProbeTest extends RabbitRetryFixture {

  static final String QUEUE = "idem.container-error-handler";
  static final String DLQ = "idem.container-error-handler.dlq";

  /** What the application's error handler judged fatal: every failure it was called for. */
  static final List<Throwable> judgedFatal = new CopyOnWriteArrayList<>();

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-container-error-handler", queues = QUEUE)
    @IdempotentListener(name = "rabbit-container-error-handler", key = "#event")
    public void onEvent(String event) {
      run(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    KeyedListener keyedListener() {
      return new KeyedListener();
    }

    @Bean
    Declarables containerErrorHandlerQueues() {
      return queues(QUEUE, DLQ);
    }

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

  @Override
  String queue() {
    return QUEUE;
  }

  @Override
  String deadLetterQueue() {
    return DLQ;
  }

  @Test
  void aDeferralIsNotRejectedByTheContainersErrorHandler() throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    assertDeferredWhileDownNotDeadLettered(event);
    send(marker);
    awaitRuns(event, marker);
    assertThat(judgedFatal)
        .as("failures the application's error handler saw")
        .noneMatch(t -> DeferredDeliveryException.deferralIn(t) != null);
  }

  /** The other side: a send that failed (the store answers) reaches the container's handler. */
  @Test
  void aFailedSendStillReachesTheContainersErrorHandler() throws Exception {
    String failing = "fail-" + UUID.randomUUID();
    send(failing);
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the failed send judged by the application's error handler",
            () -> judgedFatal.stream().map(RabbitContainerErrorHandlerProbeTest::payload).toList(),
            done -> done.contains(failing));
  }

  private static String payload(Throwable failure) {
    return failure instanceof ListenerExecutionFailedException failed
            && failed.getFailedMessage() != null
        ? new String(failed.getFailedMessage().getBody(), StandardCharsets.UTF_8)
        : String.valueOf(failure);
  }
}
