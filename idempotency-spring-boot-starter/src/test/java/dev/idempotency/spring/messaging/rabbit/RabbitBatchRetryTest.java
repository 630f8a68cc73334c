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
import org.springframework.amqp.rabbit.config.RetryInterceptorBuilder;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.retry.MessageBatchRecoverer;
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
 * SPEC 15 for a RabbitMQ batch listener behind the application's retry (fixrabbit; the batch side
 * of RabbitRetryAdviceProbeTest): the batch factory's advice chain is a stateless retry with a
 * batch recoverer that republishes each message to a DLQ. A batch deferred while the store is down
 * (nothing sent) is requeued, never retried into the recoverer; once the store answers, each
 * message runs. A batch whose send fails is still retried and recovered as configured. On the
 * shared rabbitmq-server.
 */
@SpringBootTest(classes = RabbitBatchRetryTest.App.class)
@DirtiesContext
class RabbitBatchRetryTest {

  static final String QUEUE = "idem.batch-retry";
  static final String DLQ = "idem.batch-retry.dlq";

  static final List<String> runs = new CopyOnWriteArrayList<>();

  public static class BatchListener {
    @RabbitListener(id = "rabbit-batch-retry", queues = QUEUE, containerFactory = "retryBatches")
    @IdempotentListener(name = "rabbit-batch-retry", key = "#payload")
    public void onEvents(List<String> events) {
      for (String event : events) {
        runs.add(event);
        if (event.startsWith("fail-")) {
          throw new IllegalStateException("the send failed (test)");
        }
      }
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    BatchListener batchListener() {
      return new BatchListener();
    }

    @Bean
    Declarables batchRetryQueues() {
      return new Declarables(
          QueueBuilder.nonDurable(QUEUE).build(), QueueBuilder.nonDurable(DLQ).build());
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
          (messages, cause) -> messages.forEach(message -> template.send("", DLQ, message));
      factory.setAdviceChain(
          RetryInterceptorBuilder.stateless()
              .backOffOptions(20, 2.0, 100)
              .recoverer(deadLetter)
              .build());
      return factory;
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
  void aBatchDeferredWhileTheStoreIsDownIsNotDeadLetteredByTheApplicationsRetry() throws Exception {
    String first = "event-" + UUID.randomUUID();
    String second = "event-" + UUID.randomUUID();
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      send(first);
      send(second);
      // down until a message is dead-lettered, or the batch was refused 20 times (requeued and
      // redelivered rather than dead-lettered)
      Poll.within(Duration.ofSeconds(60))
          .until(
              "a message dead-lettered, or the batch refused 20 times",
              () -> {
                drain(deadLettered);
                return !deadLettered.isEmpty() || store.refused.get() >= refusedBefore + 20;
              },
              done -> done);
    } finally {
      store.down.set(false);
    }
    assertThat(deadLettered)
        .as(
            "deferred messages in the dead-letter queue (refused claims: %s)",
            store.refused.get() - refusedBefore)
        .isEmpty();
    Poll.within(Duration.ofSeconds(30))
        .until(
            "the deferred batch's runs",
            () -> List.copyOf(runs),
            done -> done.contains(first) && done.contains(second));
  }

  @Test
  void aBatchWhoseSendFailedStillGoesThroughTheApplicationsRetryAndRecoverer() throws Exception {
    String failing = "fail-" + UUID.randomUUID();
    List<String> deadLettered = new CopyOnWriteArrayList<>();
    send(failing);
    Poll.within(Duration.ofSeconds(60))
        .until(
            "the failed batch dead-lettered by the application's recoverer",
            () -> {
              drain(deadLettered);
              return deadLettered.contains(failing);
            },
            done -> done);
    assertThat(runs.stream().filter(failing::equals).count())
        .as("runs of the failing message: the first and the retry's")
        .isGreaterThanOrEqualTo(2);
  }

  private void drain(List<String> into) {
    for (Message m = template.receive(DLQ); m != null; m = template.receive(DLQ)) {
      into.add(new String(m.getBody(), StandardCharsets.UTF_8));
    }
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
