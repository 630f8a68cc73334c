package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.retry.MessageRecoverer;
import org.springframework.amqp.rabbit.retry.RepublishMessageRecoverer;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * SPEC 15 behind Spring Boot's own listener retry (the companion of RabbitRetryAdviceTest without a
 * customizer): {@code spring.rabbitmq.listener.simple.retry.enabled=true} with a {@code
 * MessageRecoverer} bean that republishes to a DLQ, as Boot's reference describes. Boot puts the
 * retry in the factory's advice chain, the starter its advice before it and its deferral catcher
 * last, inside the retry: a delivery deferred while the store is down (nothing sent) is requeued,
 * never retried into the recoverer and dead-lettered. On the shared rabbitmq-server.
 */
@SpringBootTest(classes = RabbitBootRetryTest.App.class)
@DirtiesContext
class RabbitBootRetryTest extends RabbitRetryFixture {

  static final String QUEUE = "idem.boot-retry";
  static final String DLQ = "idem.boot-retry.dlq";

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-boot-retry", queues = QUEUE)
    @IdempotentListener(name = "rabbit-boot-retry", key = "#event")
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
    Declarables retryAdviceQueues() {
      return queues(QUEUE, DLQ);
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
  static void bootRetry(DynamicPropertyRegistry registry) {
    registry.add("spring.rabbitmq.listener.simple.retry.enabled", () -> "true");
    registry.add("spring.rabbitmq.listener.simple.retry.initial-interval", () -> "20ms");
    registry.add("spring.rabbitmq.listener.simple.retry.max-interval", () -> "100ms");
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
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByBootsListenerRetry()
      throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    assertDeferredWhileDownNotDeadLettered(event);
    send(marker);
    awaitRuns(event, marker);
  }
}
