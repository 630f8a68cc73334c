package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.Channel;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import dev.idempotency.testservers.RabbitMqServer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.api.RabbitListenerErrorHandler;
import org.springframework.amqp.rabbit.support.ListenerExecutionFailedException;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * probeU (fixrabbit; SPEC 1, SPEC 15): the application's {@code RabbitListenerErrorHandler} on the
 * {@code @RabbitListener} (its {@code errorHandler} attribute) sits inside the listener adapter,
 * inside every advice of the container, so inside the starter's deferral catcher ({@code
 * RabbitDeliveryAdvice.LAST}) too: it sees a deferral (here the store is down: nothing was sent) as
 * the listener's failure before any part of the starter does.
 *
 * <ul>
 *   <li>An error handler that logs and returns (the usual "do not requeue a failing message in a
 *       loop" handler): the deferral is swallowed, the adapter acknowledges the delivery, and the
 *       message is gone without its send (a lost send). Open finding.
 *   <li>An error handler that rejects with {@code AmqpRejectAndDontRequeueException(cause)}: the
 *       deferral is still in the cause chain, the catcher takes it and the delivery is requeued
 *       (control; passes).
 * </ul>
 *
 * On the shared rabbitmq-server.
 *
 * <p>Severity medium (a lost send). Fails on main (dc550c5) on Boot 3.5 and 4.0: "timed out after
 * 30000 ms waiting for the deferred delivery's run" (the event handled by the error handler, never
 * run); the control passes on both.
 */
@SpringBootTest(classes = RabbitListenerErrorHandlerProbeTest.App.class)
@DirtiesContext
class RabbitListenerErrorHandlerProbeTest {

  static final String SWALLOW_QUEUE = "idem.error-handler.swallow";
  static final String REJECT_QUEUE = "idem.error-handler.reject";

  static final List<String> runs = new CopyOnWriteArrayList<>();
  static final List<String> handled = new CopyOnWriteArrayList<>();

  public static class KeyedListeners {
    @RabbitListener(
        id = "rabbit-error-handler-swallow",
        queues = SWALLOW_QUEUE,
        errorHandler = "loggingErrorHandler")
    @IdempotentListener(name = "rabbit-error-handler-swallow", key = "#event")
    public void onSwallowed(String event) {
      runs.add(event);
    }

    @RabbitListener(
        id = "rabbit-error-handler-reject",
        queues = REJECT_QUEUE,
        errorHandler = "rejectingErrorHandler")
    @IdempotentListener(name = "rabbit-error-handler-reject", key = "#event")
    public void onRejected(String event) {
      runs.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    KeyedListeners keyedListeners() {
      return new KeyedListeners();
    }

    @Bean
    Declarables errorHandlerQueues() {
      return new Declarables(
          QueueBuilder.nonDurable(SWALLOW_QUEUE).build(),
          QueueBuilder.nonDurable(REJECT_QUEUE).build());
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
        throw new org.springframework.amqp.AmqpRejectAndDontRequeueException(
            "rejected by the application", exception);
      };
    }

    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> shortReceiveTimeout() {
      return container -> container.setReceiveTimeout(100L);
    }
  }

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
    registry.add("spring.rabbitmq.port", () -> RabbitMqServer.shared().port());
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }

  @Autowired RabbitTemplate template;
  @Autowired SwitchableKeyStore store;

  @Tag("open-finding")
  @Test
  void aDeferralSwallowedByTheApplicationsErrorHandlerIsStillSentLater() throws Exception {
    deferredThenSent(SWALLOW_QUEUE);
  }

  @Test
  void aDeferralRejectedWithItsCauseByTheApplicationsErrorHandlerIsStillSentLater()
      throws Exception {
    deferredThenSent(REJECT_QUEUE);
  }

  private void deferredThenSent(String queue) throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      send(queue, event);
      // the store stays down until the delivery was refused at least once and the application's
      // error handler saw it (or the claims went on: requeued before the handler)
      Poll.within(Duration.ofSeconds(60))
          .until(
              "the delivery refused while the store is down",
              () -> store.refused.get() > refusedBefore && handled.contains(event),
              done -> done);
    } finally {
      store.down.set(false);
    }
    // the store answers again: the marker, sent after, runs; the deferred event must run too
    send(queue, marker);
    Poll.within(Duration.ofSeconds(30))
        .until("the marker's run", () -> List.copyOf(runs), done -> done.contains(marker));
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the deferred delivery's run (runs "
                + runs
                + ", handled by the error handler "
                + handled
                + ")",
            () -> List.copyOf(runs),
            done -> done.contains(event));
    assertThat(runs.stream().filter(event::equals).count()).as("sends of the event").isEqualTo(1);
  }

  private void send(String queue, String payload) {
    template.send(
        "",
        queue,
        MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
            .setContentType("text/plain")
            .build());
  }
}
