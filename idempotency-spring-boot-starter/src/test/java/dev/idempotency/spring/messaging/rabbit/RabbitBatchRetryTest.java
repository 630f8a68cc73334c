package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.retry.MessageBatchRecoverer;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * SPEC 15 for a RabbitMQ batch listener behind the application's retry (the batch side of
 * RabbitRetryAdviceTest): the batch factory's advice chain is a stateless retry with a batch
 * recoverer that republishes each message to a DLQ. A batch deferred while the store is down
 * (nothing sent) is requeued, never retried into the recoverer; once the store answers, each
 * message runs. A batch whose send fails is still retried and recovered as configured. On the
 * shared rabbitmq-server.
 */
@SpringBootTest(
    classes = RabbitBatchRetryTest.App.class,
    properties = RabbitDeferralFixture.QUEUE_PROPERTY + "=" + RabbitBatchRetryTest.QUEUE)
class RabbitBatchRetryTest extends RabbitDeferralFixture {

  static final String QUEUE = "idem.batch-retry";

  public static class BatchListener {
    @RabbitListener(id = "rabbit-batch-retry", queues = QUEUE, containerFactory = "retryBatches")
    @IdempotentListener(name = "rabbit-batch-retry", key = "#payload")
    public void onEvents(List<String> events) {
      events.forEach(RabbitDeferralFixture::run);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @Import(Application.class)
  static class App {
    @Bean
    BatchListener batchListener() {
      return new BatchListener();
    }

    /** Consumer-side batches, retried in the consumer, then each message republished to the DLQ. */
    @Bean
    SimpleRabbitListenerContainerFactory retryBatches(
        ConnectionFactory connectionFactory, RabbitTemplate template) {
      SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setBatchListener(true);
      factory.setConsumerBatchEnabled(true);
      factory.setBatchSize(10);
      factory.setReceiveTimeout(100L);
      MessageBatchRecoverer deadLetter =
          (messages, cause) ->
              messages.forEach(message -> template.send("", deadLetterQueue(QUEUE), message));
      factory.setAdviceChain(
          RetryInterceptorBuilder.stateless()
              .backOffOptions(20, 2.0, 100)
              .recoverer(deadLetter)
              .build());
      return factory;
    }
  }

  @Test
  void aBatchDeferredWhileTheStoreIsDownIsNotDeadLetteredByTheApplicationsRetry() throws Exception {
    String first = "event-" + UUID.randomUUID();
    String second = "event-" + UUID.randomUUID();
    assertDeferredWhileDownNotDeadLettered(first, second);
    awaitRuns(first, second);
  }

  @Test
  void aBatchWhoseSendFailedStillGoesThroughTheApplicationsRetryAndRecoverer() throws Exception {
    assertFailedSendRetriedThenDeadLettered("fail-" + UUID.randomUUID());
  }
}
