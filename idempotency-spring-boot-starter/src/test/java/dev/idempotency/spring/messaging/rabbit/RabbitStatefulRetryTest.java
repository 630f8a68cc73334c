package dev.idempotency.spring.messaging.rabbit;

import java.nio.charset.StandardCharsets;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * SPEC 15 behind a stateful retry (RabbitRetryAdviceTest with {@code
 * RetryInterceptorBuilder.stateful()}): the retry rethrows each failure, the container requeues the
 * message, and the retry counts its attempts by message id until it hands it to the recoverer. A
 * delivery deferred while the store is down never reaches the retry (the starter's last advice
 * takes it), so it neither counts as an attempt nor is dead-lettered; a failed send is still
 * retried and then republished to the DLQ. On the shared rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitStatefulRetryTest.App.class,
    properties = RabbitDeferralFixture.QUEUE_PROPERTY + "=" + RabbitStatefulRetryTest.QUEUE)
class RabbitStatefulRetryTest extends RabbitDeferralFixture {

  static final String QUEUE = "idem.stateful-retry";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @Import(KeyedApplication.class)
  static class App {
    /**
     * Retry each delivery statefully (rethrown and requeued; attempts counted by message id), then
     * republish it to the DLQ.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> retryThenDeadLetter(
        RabbitTemplate template) {
      return retryingContainers(RetryInterceptorBuilder.stateful(), template, QUEUE);
    }
  }

  /** A stateful retry counts attempts by message id. */
  @Override
  Message message(String payload) {
    return MessageBuilder.withBody(payload.getBytes(StandardCharsets.UTF_8))
        .setContentType("text/plain")
        .setMessageId(UUID.randomUUID().toString())
        .build();
  }

  @Test
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByAStatefulRetry() throws Exception {
    assertDeferredThenSentOnce();
  }

  /**
   * The other side of the rule: a listener's own failure (a send that failed; the store answers)
   * still goes through the application's retry, which runs the listener again, and then its
   * recoverer, which dead-letters it as the application configured.
   */
  @Test
  void aFailedSendStillGoesThroughTheStatefulRetryAndRecoverer() throws Exception {
    assertFailedSendRetriedThenDeadLettered("fail-" + UUID.randomUUID());
  }
}
