package dev.idempotency.spring.messaging.rabbit;

import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * SPEC 15 behind an application's {@code ContainerCustomizer} that sets the container's advice
 * chain to Spring AMQP's stateless retry with a {@code RepublishMessageRecoverer} (the dead-letter
 * pattern of the Spring AMQP reference). The starter puts its advice first, the application's after
 * it ({@code RabbitDeliveryAdvice.includeIn}), and its deferral catcher last, inside the retry: a
 * delivery deferred while the store is down (nothing sent) is handed past the retry to the first
 * part, which requeues it, so it is never dead-lettered (SPEC 15: "whatever the container's retry
 * or requeue settings"); a failed send is still retried and dead-lettered. On the shared
 * rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitRetryAdviceTest.App.class,
    properties = RabbitDeferralFixture.QUEUE_PROPERTY + "=" + RabbitRetryAdviceTest.QUEUE)
class RabbitRetryAdviceTest extends RabbitDeferralFixture {

  static final String QUEUE = "idem.retry-advice";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @Import(KeyedApplication.class)
  static class App {
    /**
     * Retry each delivery in the consumer (the default attempts: three on Spring AMQP 3.2, four on
     * 4.0), then republish it to the DLQ.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> retryThenDeadLetter(
        RabbitTemplate template) {
      return retryingContainers(RetryInterceptorBuilder.stateless(), template, QUEUE);
    }
  }

  @Test
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByTheApplicationsRetryAdvice()
      throws Exception {
    assertDeferredThenSentOnce();
  }

  /**
   * The other side of the rule: a listener's own failure (a send that failed; the store answers)
   * still goes through the application's retry, which runs the listener again, and then its
   * recoverer, which dead-letters it as the application configured.
   */
  @Test
  void aFailedSendStillGoesThroughTheApplicationsRetryAndRecoverer() throws Exception {
    assertFailedSendRetriedThenDeadLettered("fail-" + UUID.randomUUID());
  }
}
