package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.springframework.amqp.core.Declarable;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.batch.SimpleBatchingStrategy;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.BatchingRabbitTemplate;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.MessageListenerAdapter;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * What the RabbitMQ probes of producer batches and container beans share, on the shared
 * rabbitmq-server: the broker and listener properties; dead-lettered queues ({@link
 * #deadLetteredQueues}: a rejected message goes to the queue's name and {@link #DEAD_LETTERS} on
 * the default exchange); a consumer-side batch factory and a record container bean built with
 * Boot's factory; a producer's batch published as one AMQP message ({@link #publishBatch}, with a
 * scheduler for the class); messages keyed by their own Idempotency-Key header or without one; a
 * marker published behind what a test sent, awaited to know the queue's earlier deliveries are
 * over; and the bounded waits. A subclass names what its listeners sent ({@link #sends()}).
 */
abstract class RabbitProbeSupport {

  /** The suffix of a queue's dead-letter queue. */
  static final String DEAD_LETTERS = ".dead-letters";

  private static ThreadPoolTaskScheduler scheduler;

  @Autowired ConnectionFactory connectionFactory;
  @Autowired RabbitTemplate plain;

  @DynamicPropertySource
  static void rabbit(DynamicPropertyRegistry registry) {
    RabbitTestProperties.register(registry);
  }

  @BeforeAll
  static void startScheduler() {
    scheduler = new ThreadPoolTaskScheduler();
    scheduler.initialize();
  }

  @AfterAll
  static void stopScheduler() {
    scheduler.shutdown();
  }

  /** The payloads the test's listeners sent, in order. */
  abstract List<String> sends();

  /** How many times the test's listeners sent {@code event}. */
  int sent(String event) {
    return (int) sends().stream().filter(event::equals).count();
  }

  /**
   * Each queue, non-durable and dead-lettered ({@link #deadLettered}), and its dead-letter queue.
   */
  static Declarables deadLetteredQueues(String... queues) {
    List<Declarable> declarables = new ArrayList<>();
    for (String queue : queues) {
      declarables.add(deadLettered(queue));
      declarables.add(QueueBuilder.nonDurable(queue + DEAD_LETTERS).build());
    }
    return new Declarables(declarables);
  }

  /** A queue whose rejected messages go to its dead-letter queue (the default exchange). */
  static Queue deadLettered(String name) {
    return QueueBuilder.nonDurable(name)
        .deadLetterExchange("")
        .deadLetterRoutingKey(name + DEAD_LETTERS)
        .build();
  }

  /** Consumer-side batches of up to ten messages. */
  static SimpleRabbitListenerContainerFactory consumerBatchFactory(
      ConnectionFactory connectionFactory) {
    SimpleRabbitListenerContainerFactory factory = new SimpleRabbitListenerContainerFactory();
    factory.setConnectionFactory(connectionFactory);
    factory.setBatchListener(true);
    factory.setConsumerBatchEnabled(true);
    factory.setBatchSize(10);
    factory.setReceiveTimeout(300L);
    return factory;
  }

  /**
   * A record listener's container of {@code queue}, built with Boot's factory ({@code
   * createListenerContainer()}), that runs {@code method} of {@code listeners}; not initialized.
   */
  static SimpleMessageListenerContainer factoryContainer(
      SimpleRabbitListenerContainerFactory factory, String queue, Object listeners, String method) {
    SimpleMessageListenerContainer container = factory.createListenerContainer();
    container.setQueueNames(queue);
    container.setReceiveTimeout(100L);
    container.setMessageListener(new MessageListenerAdapter(listeners, method));
    return container;
  }

  /** One producer batch: the messages are sent together, as one AMQP message. */
  void publishBatch(String queue, List<Message> messages) {
    BatchingRabbitTemplate template =
        new BatchingRabbitTemplate(
            connectionFactory,
            new SimpleBatchingStrategy(messages.size(), 1_000_000, 60_000),
            scheduler);
    try {
      for (Message message : messages) {
        template.send("", queue, message);
      }
      template.flush();
    } finally {
      template.stop();
    }
  }

  /**
   * Publishes a keyed marker ({@code prefix-marker-…}) to {@code queue} on its own and waits until
   * it is sent: the queue's deliveries before it are over.
   */
  void awaitMarker(String queue, String prefix) throws InterruptedException {
    String marker = unique(prefix + "-marker");
    plain.send("", queue, message(marker));
    await("the marker sent", () -> sent(marker) >= 1);
  }

  /** Nothing in the dead-letter queue of {@code queue} (within half a second). */
  void assertNothingDeadLettered(String queue) {
    assertThat(plain.receive(queue + DEAD_LETTERS, 500)).as("dead-lettered").isNull();
  }

  /** A message keyed by its own Idempotency-Key header. */
  static Message message(String payload) {
    MessageProperties properties = new MessageProperties();
    properties.setContentType(MessageProperties.CONTENT_TYPE_TEXT_PLAIN);
    properties.setHeader("Idempotency-Key", "key-" + payload);
    return new Message(payload.getBytes(StandardCharsets.UTF_8), properties);
  }

  /** A message without an Idempotency-Key header. */
  static Message withoutKey(String payload) {
    MessageProperties properties = new MessageProperties();
    properties.setContentType(MessageProperties.CONTENT_TYPE_TEXT_PLAIN);
    return new Message(payload.getBytes(StandardCharsets.UTF_8), properties);
  }

  /** Each payload as a message keyed by its own Idempotency-Key header. */
  static List<Message> messages(List<String> payloads) {
    return payloads.stream().map(RabbitProbeSupport::message).toList();
  }

  static String unique(String what) {
    return what + "-" + UUID.randomUUID();
  }

  /** Bounded polling: generous, the machine is busy. */
  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + 45_000_000_000L;
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after 45 s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }
}
