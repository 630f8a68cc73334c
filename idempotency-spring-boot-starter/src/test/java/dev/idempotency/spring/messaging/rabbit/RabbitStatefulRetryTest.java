package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

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
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.retry.RepublishMessageRecoverer;
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
 * SPEC 15 behind a stateful retry (fixrabbit; RabbitRetryAdviceProbeTest with {@code
 * RetryInterceptorBuilder.stateful()}): the retry rethrows each failure, the container requeues the
 * message, and the retry counts its attempts by message id until it hands it to the recoverer. A
 * delivery deferred while the store is down never reaches the retry (the starter's last advice
 * takes it), so it neither counts as an attempt nor is dead-lettered; a failed send is still
 * retried and then republished to the DLQ. On the shared rabbitmq-server.
 */
@SpringBootTest(classes = RabbitStatefulRetryTest.App.class)
@DirtiesContext
class RabbitStatefulRetryTest {

  static final String QUEUE = "idem.stateful-retry";
  static final String DLQ = "idem.stateful-retry.dlq";

  static final List<String> runs = new CopyOnWriteArrayList<>();

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-stateful-retry", queues = QUEUE)
    @IdempotentListener(name = "rabbit-stateful-retry", key = "#event")
    public void onEvent(String event) {
      runs.add(event);
      if (event.startsWith("fail-")) {
        throw new IllegalStateException("the send failed (test)");
      }
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
    Declarables retryAdviceQueues() {
      return new Declarables(
          QueueBuilder.nonDurable(QUEUE).build(), QueueBuilder.nonDurable(DLQ).build());
    }

    /**
     * Retry each delivery statefully (rethrown and requeued; attempts counted by message id), then
     * republish it to the DLQ.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> retryThenDeadLetter(
        RabbitTemplate template) {
      return container -> {
        container.setReceiveTimeout(100L);
        container.setAdviceChain(
            RetryInterceptorBuilder.stateful()
                .backOffOptions(20, 2.0, 100)
                .recoverer(new RepublishMessageRecoverer(template, "", DLQ))
                .build());
      };
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

  @Test
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByAStatefulRetry() throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    store.down.set(true);
    try {
      send(event);
      // the store stays down until the delivery is dead-lettered, or has been refused so often
      // (20 claims) that it was plainly requeued and redelivered rather than dead-lettered
      Poll.within(Duration.ofSeconds(60))
          .until(
              "the delivery dead-lettered, or refused 20 times",
              () -> {
                for (Message m = template.receive(DLQ); m != null; m = template.receive(DLQ)) {
                  deadLettered.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
                return !deadLettered.isEmpty() || store.refused.get() >= 20;
              },
              done -> done);
    } finally {
      store.down.set(false);
    }
    assertThat(deadLettered)
        .as(
            "deferred deliveries in the dead-letter queue (refused claims: %s)",
            store.refused.get())
        .isEmpty();
    // the store answers again (the guard may refuse at once a little longer): both run
    send(marker);
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the deferred delivery's and the marker's runs",
            () -> List.copyOf(runs),
            done -> done.contains(event) && done.contains(marker));
  }

  /**
   * The other side of the rule: a listener's own failure (a send that failed; the store answers)
   * still goes through the application's retry, which runs the listener again, and then its
   * recoverer, which dead-letters it as the application configured.
   */
  @Test
  void aFailedSendStillGoesThroughTheStatefulRetryAndRecoverer() throws Exception {
    String failing = "fail-" + UUID.randomUUID();
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    send(failing);
    Poll.within(Duration.ofSeconds(60))
        .until(
            "the failed delivery dead-lettered by the application's recoverer",
            () -> {
              for (Message m = template.receive(DLQ); m != null; m = template.receive(DLQ)) {
                deadLettered.add(new String(m.getBody(), StandardCharsets.UTF_8));
              }
              return deadLettered.contains(failing);
            },
            done -> done);
    assertThat(runs.stream().filter(failing::equals).count())
        .as("runs of the failing delivery: the first and the retry's")
        .isGreaterThanOrEqualTo(2);
  }

  private void send(String payload) {
    template.send(
        "",
        QUEUE,
        MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
            .setContentType("text/plain")
            .setMessageId(UUID.randomUUID().toString())
            .build());
  }
}
