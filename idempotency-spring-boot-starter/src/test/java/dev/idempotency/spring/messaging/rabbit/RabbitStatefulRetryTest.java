package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.nio.charset.StandardCharsets;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
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
 * SPEC 15 behind a stateful retry (RabbitRetryAdviceTest with {@code
 * RetryInterceptorBuilder.stateful()}): the retry rethrows each failure, the container requeues the
 * message, and the retry counts its attempts by message id until it hands it to the recoverer. A
 * delivery deferred while the store is down never reaches the retry (the starter's last advice
 * takes it), so it neither counts as an attempt nor is dead-lettered; a failed send is still
 * retried and then republished to the DLQ. On the shared rabbitmq-server.
 */
@SpringBootTest(classes = RabbitStatefulRetryTest.App.class)
@DirtiesContext
class RabbitStatefulRetryTest extends RabbitRetryFixture {

  static final String QUEUE = "idem.stateful-retry";
  static final String DLQ = "idem.stateful-retry.dlq";

  public static class KeyedListener {
    @RabbitListener(id = "rabbit-stateful-retry", queues = QUEUE)
    @IdempotentListener(name = "rabbit-stateful-retry", key = "#event")
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
     * Retry each delivery statefully (rethrown and requeued; attempts counted by message id), then
     * republish it to the DLQ.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> retryThenDeadLetter(
        RabbitTemplate template) {
      return quickStopWith(
          RetryInterceptorBuilder.stateful()
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
  void aFailedSendStillGoesThroughTheStatefulRetryAndRecoverer() throws Exception {
    assertFailedSendRetriedThenDeadLettered("fail-" + UUID.randomUUID());
  }
}
