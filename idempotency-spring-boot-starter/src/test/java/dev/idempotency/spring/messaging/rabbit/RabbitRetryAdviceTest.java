package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.retry.RepublishMessageRecoverer;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

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
@SpringBootTest(classes = RabbitRetryAdviceTest.App.class)
@DirtiesContext
class RabbitRetryAdviceTest extends RabbitRetryFixture {

  static final String QUEUE = "idem.retry-advice";
  static final String DLQ = "idem.retry-advice.dlq";

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-retry-advice", queues = QUEUE)
    @IdempotentListener(name = "rabbit-retry-advice", key = "#event")
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

    /**
     * Retry each delivery in the consumer (the default attempts: three on Spring AMQP 3.2, four on
     * 4.0), then republish it to the DLQ.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> retryThenDeadLetter(
        RabbitTemplate template) {
      return quickStopWith(
          RetryInterceptorBuilder.stateless()
              .backOffOptions(20, 2.0, 100)
              .recoverer(new RepublishMessageRecoverer(template, "", DLQ))
              .build());
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
  void aDeliveryDeferredWhileTheStoreIsDownIsNotDeadLetteredByTheApplicationsRetryAdvice()
      throws Exception {
    String event = "event-" + UUID.randomUUID();
    String marker = "marker-" + UUID.randomUUID();
    assertDeferredWhileDownNotDeadLettered(event);
    send(marker);
    awaitRuns(event, marker);
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
