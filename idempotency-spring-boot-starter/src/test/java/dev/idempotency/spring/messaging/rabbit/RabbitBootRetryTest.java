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
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.retry.MessageRecoverer;
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
 * probeS (SPEC 15; the companion of RabbitRetryAdviceProbeTest without a customizer): Spring Boot's
 * own listener retry ({@code spring.rabbitmq.listener.simple.retry.enabled=true}) with a {@code
 * MessageRecoverer} bean that republishes to a DLQ, as Boot's reference describes. Boot puts the
 * retry in the factory's advice chain and the starter puts its advice before it, so the retry runs
 * inside the starter's advice: a delivery deferred because the store is down (nothing sent) is
 * retried, republished to the DLQ and acknowledged. On the shared rabbitmq-server.
 *
 * <p>Fixed (fixrabbit): the starter's deferral catcher is last in the chain, inside the retry, and
 * hands a deferral past it to the first part, which requeues it.
 */
@SpringBootTest(classes = RabbitBootRetryProbeTest.App.class)
@DirtiesContext
class RabbitBootRetryProbeTest {

  static final String QUEUE = "idem.boot-retry";
  static final String DLQ = "idem.boot-retry.dlq";

  static final List<String> runs = new CopyOnWriteArrayList<>();

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-boot-retry", queues = QUEUE)
    @IdempotentListener(name = "rabbit-boot-retry", key = "#event")
    public void onEvent(String event) {
      runs.add(event);
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

    /** Boot's retry hands an exhausted delivery to this recoverer: republished to the DLQ. */
    @Bean
    MessageRecoverer deadLetter(RabbitTemplate template) {
      return new RepublishMessageRecoverer(template, "", DLQ);
    }

    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> quickStop() {
      return container -> container.setReceiveTimeout(100L);
    }
  }

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
    registry.add("spring.rabbitmq.port", () -> RabbitMqServer.shared().port());
    registry.add("spring.rabbitmq.listener.simple.retry.enabled", () -> "true");
    registry.add("spring.rabbitmq.listener.simple.retry.initial-interval", () -> "20ms");
    registry.add("spring.rabbitmq.listener.simple.retry.max-interval", () -> "100ms");
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }

  @Autowired RabbitTemplate template;
  @Autowired SwitchableKeyStore store;

  @Test
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByBootsListenerRetry()
      throws Exception {
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

  private void send(String payload) {
    template.send(
        "",
        QUEUE,
        MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
            .setContentType("text/plain")
            .build());
  }
}
