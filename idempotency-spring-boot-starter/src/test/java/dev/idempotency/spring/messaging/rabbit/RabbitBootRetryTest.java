package dev.idempotency.spring.messaging.rabbit;

import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.retry.MessageRecoverer;
import org.springframework.amqp.rabbit.retry.RepublishMessageRecoverer;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * SPEC 15 behind Spring Boot's own listener retry (the companion of RabbitRetryAdviceTest without a
 * customizer): {@code spring.rabbitmq.listener.simple.retry.enabled=true} with a {@code
 * MessageRecoverer} bean that republishes to a DLQ, as Boot's reference describes. Boot puts the
 * retry in the factory's advice chain, the starter its advice before it and its deferral catcher
 * last, inside the retry: a delivery deferred while the store is down (nothing sent) is requeued,
 * never retried into the recoverer and dead-lettered. On the shared rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitBootRetryTest.App.class,
    properties = {
      RabbitDeferralFixture.QUEUE_PROPERTY + "=" + RabbitBootRetryTest.QUEUE,
      "spring.rabbitmq.listener.simple.retry.enabled=true",
      "spring.rabbitmq.listener.simple.retry.initial-interval=20ms",
      "spring.rabbitmq.listener.simple.retry.max-interval=100ms"
    })
class RabbitBootRetryTest extends RabbitDeferralFixture {

  static final String QUEUE = "idem.boot-retry";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @Import(KeyedApplication.class)
  static class App {
    /** Boot's retry hands an exhausted delivery to this recoverer: republished to the DLQ. */
    @Bean
    MessageRecoverer deadLetter(RabbitTemplate template) {
      return new RepublishMessageRecoverer(template, "", deadLetterQueue(QUEUE));
    }

    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> quickStop() {
      return container -> container.setReceiveTimeout(100L);
    }
  }

  @Test
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByBootsListenerRetry()
      throws Exception {
    assertDeferredThenSentOnce();
  }
}
