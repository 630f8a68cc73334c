package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.BatchListenerContract;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import dev.idempotency.testservers.RabbitMqServer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarable;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
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
 * Issue 27's table on a real RabbitMQ broker (the Debian package's server, started by {@link
 * RabbitMqServer}), through Spring Boot's AMQP auto-configuration with its defaults (a failed
 * delivery is requeued). Each queue dead-letters to {@code <queue>.dlq}.
 */
@SpringBootTest(classes = RabbitListenerTest.App.class)
@DirtiesContext
class RabbitListenerTest extends BatchListenerContract {

  static final List<String> QUEUES =
      List.of("idem.record", "idem.dead-letter", "idem.header", "idem.keyed", "idem.batch");

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    RabbitListeners rabbitListeners(Sends sends) {
      return new RabbitListeners(sends);
    }

    @Bean
    Declarables queues() {
      List<Declarable> declarables = new ArrayList<>();
      for (String queue : QUEUES) {
        declarables.add(
            QueueBuilder.nonDurable(queue)
                .deadLetterExchange("")
                .deadLetterRoutingKey(queue + ".dlq")
                .build());
        declarables.add(new Queue(queue + ".dlq", false));
      }
      return new Declarables(declarables);
    }

    /**
     * Containers that stop within 100 ms: a consumer waits up to its receive timeout (1 s by
     * default) for a message before it sees the stop, and the tests stop a container to check its
     * queue. Deliveries are pushed by the broker and unaffected.
     */
    @Bean
    ContainerCustomizer<SimpleMessageListenerContainer> quickStop() {
      return container -> container.setReceiveTimeout(100L);
    }

    /** Consumer-side batches of up to ten messages. */
    @Bean
    SimpleRabbitListenerContainerFactory batchFactory(ConnectionFactory connectionFactory) {
      SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setBatchListener(true);
      factory.setConsumerBatchEnabled(true);
      factory.setBatchSize(10);
      factory.setReceiveTimeout(300L);
      return factory;
    }
  }

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    RabbitTestProperties.register(registry);
  }

  @Autowired RabbitTemplate template;
  @Autowired RabbitAdmin admin;
  @Autowired RabbitListenerEndpointRegistry registry;
  private final Map<String, List<String>> deadLetters = new ConcurrentHashMap<>();

  static String queue(String listener) {
    return switch (listener) {
      case RabbitListeners.RECORD -> "idem.record";
      case RabbitListeners.DEAD_LETTER -> "idem.dead-letter";
      case RabbitListeners.HEADER -> "idem.header";
      case RabbitListeners.KEYED -> "idem.keyed";
      case RabbitListeners.BATCH -> "idem.batch";
      default -> throw new IllegalArgumentException(listener);
    };
  }

  static String container(String listener) {
    return listener.equals(RabbitListeners.HEADER) ? "rabbit-header" : listener;
  }

  @Override
  protected String recordListener() {
    return RabbitListeners.RECORD;
  }

  @Override
  protected String deadLetterListener() {
    return RabbitListeners.DEAD_LETTER;
  }

  @Override
  protected String keyedListener() {
    return RabbitListeners.KEYED;
  }

  /** Rejected without requeue: the queue's dead-letter exchange takes it at once. */
  @Override
  protected int deliveriesOfAPoisonMessage() {
    return 1;
  }

  @Override
  protected String headerListener() {
    return RabbitListeners.HEADER;
  }

  @Override
  protected String batchListener() {
    return RabbitListeners.BATCH;
  }

  @Override
  protected void publish(String listener, String payload, String idempotencyKey) {
    template.convertAndSend(
        "",
        queue(listener),
        payload,
        message -> {
          if (idempotencyKey != null) {
            message.getMessageProperties().setHeader("Idempotency-Key", idempotencyKey);
          }
          return message;
        });
  }

  @Override
  protected void publishBatch(List<String> payloads) {
    for (String payload : payloads) {
      publish(RabbitListeners.BATCH, payload, null);
    }
    registry.getListenerContainer(RabbitListeners.BATCH).start();
  }

  @Override
  protected void afterBatch() {
    registry.getListenerContainer(RabbitListeners.BATCH).stop();
  }

  /**
   * A batch listener that copies its list ({@code new ArrayList<>(list)}) before its sends, and
   * whose second message's send fails (named by index): each message is sent once on the whole
   * batch's redelivery. The copy read every message; counting each read as sent had the third,
   * never sent, replayed (probe41; held since main's revert of that rule).
   */
  @Test
  void aCopiedBatchWhoseSecondMessageFailsSendsEveryMessageOnce() throws Exception {
    String first = unique("b-copy-first");
    String second = unique("b-copy-second");
    String third = unique("b-copy-third");
    sends.failNext(second, 1);
    sends.copyBatches(true);
    try {
      publishBatch(List.of(first, second, third));
      await("the failed message sent", () -> sends.of(second).size() == 1);
      assertAcknowledged(batchListener());
      assertThat(
              new int[] {sends.of(first).size(), sends.of(second).size(), sends.of(third).size()})
          .as("provider sends of the three messages")
          .containsExactly(1, 1, 1);
    } finally {
      sends.copyBatches(false);
      afterBatch();
    }
  }

  /**
   * A batch listener that reads its list from the last message to the first, and whose first read
   * (the last message) fails, named by index: the messages it never read are not recorded as sent,
   * and the whole batch's redelivery sends each once (probe41; Kafka's case is {@code
   * KafkaBatchReadOrderFailureTest}).
   */
  @Test
  void aBatchReadBackwardsWhoseLastMessageFailsFirstSendsEveryMessageOnce() throws Exception {
    String first = unique("b-backwards-first");
    String second = unique("b-backwards-second");
    String third = unique("b-backwards-third");
    sends.failNext(third, 1);
    sends.readBatchesBackwards(true);
    try {
      publishBatch(List.of(first, second, third));
      await("the failed message sent", () -> sends.of(third).size() == 1);
      assertAcknowledged(batchListener());
      assertThat(sends.runs(third)).as("the failed message's runs").isEqualTo(2);
      assertThat(
              new int[] {sends.of(first).size(), sends.of(second).size(), sends.of(third).size()})
          .as("provider sends of the three messages")
          .containsExactly(1, 1, 1);
    } finally {
      sends.readBatchesBackwards(false);
      afterBatch();
    }
  }

  /** Drains the dead-letter queue into what this test has seen of it. */
  @Override
  protected List<String> deadLettered(String listener) {
    List<String> seen = deadLetters.computeIfAbsent(listener, l -> new CopyOnWriteArrayList<>());
    Message message;
    while ((message = template.receive(queue(listener) + ".dlq")) != null) {
      seen.add(new String(message.getBody(), java.nio.charset.StandardCharsets.UTF_8));
    }
    return seen;
  }

  /**
   * Nothing ready and nothing unacknowledged: with the consumer stopped, an unacknowledged message
   * would be back in the queue.
   */
  @Override
  protected void assertAcknowledged(String listener) throws Exception {
    var container = registry.getListenerContainer(container(listener));
    boolean wasRunning = container.isRunning();
    await("an empty queue", () -> admin.getQueueInfo(queue(listener)).getMessageCount() == 0);
    container.stop();
    try {
      assertThat(admin.getQueueInfo(queue(listener)).getMessageCount())
          .as("messages left once the consumer stopped")
          .isZero();
    } finally {
      if (wasRunning) {
        container.start();
      }
    }
  }
}
