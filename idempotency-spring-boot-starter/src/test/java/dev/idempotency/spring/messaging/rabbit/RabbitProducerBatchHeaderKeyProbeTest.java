package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.RabbitMqServer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.batch.SimpleBatchingStrategy;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.BatchingRabbitTemplate;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.amqp.rabbit.listener.adapter.MessageListenerAdapter;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * fixboot's probe, on a real RabbitMQ broker: a producer's batch ({@link BatchingRabbitTemplate},
 * Spring AMQP's {@code SimpleBatchingStrategy}) keeps the first message's headers only, and the
 * container splits it into messages that all carry them. A header-keyed batch listener without
 * consumer batching is refused at startup ({@link RabbitProducerBatchTest}); these are the two
 * other ways a header-keyed listener meets a producer's batch: a record listener (the container
 * splits the batch and runs the listener once per message) and a consumer-side batch listener
 * ({@code consumerBatchEnabled = true}: the split messages join the consumer's batch); and a record
 * listener's container bean built with the factory's {@code createListenerContainer()}.
 *
 * <p>Was an open finding (severity high: a lost send, SPEC section 1), confirmed on fixboot's
 * be39e67, Boot 3.5 and 4.0: "[provider sends of first, second] Expecting actual: [1, 0] to contain
 * exactly: [1, 1]": the second message carried the first's key and was acknowledged as its replay,
 * never sent. The other messages' keys never reach the consumer, so the starter now fails closed:
 * it wraps each container's batching strategy, marks the parts after the first, and reads no header
 * key from them; they have no key (SPEC section 15) and the batch is dead-lettered. Both cases
 * failed before (nothing dead-lettered: "[the producer's batch, dead-lettered] Expecting actual not
 * to be null").
 */
@SpringBootTest(
    classes = RabbitProducerBatchHeaderKeyProbeTest.App.class,
    properties = "logging.level.org.springframework.amqp.rabbit.listener=OFF")
@DirtiesContext
class RabbitProducerBatchHeaderKeyProbeTest {

  static final String RECORD_QUEUE = "idem.producer-batch.header-record";
  static final String CONSUMER_BATCH_QUEUE = "idem.producer-batch.header-consumer-batch";
  static final String BEAN_QUEUE = "idem.producer-batch.header-container-bean";
  static final String DEAD_LETTERS = ".dead-letters";

  public static class HeaderKeyedListeners {
    static final List<String> sent = new CopyOnWriteArrayList<>();

    @RabbitListener(id = "producer-batch-header-record", queues = RECORD_QUEUE)
    @IdempotentListener(name = "producer-batch-header-record")
    public void record(String event) {
      sent.add(event);
    }

    @RabbitListener(
        id = "producer-batch-header-consumer-batch",
        queues = CONSUMER_BATCH_QUEUE,
        containerFactory = "consumerBatchFactory")
    @IdempotentListener(name = "producer-batch-header-consumer-batch")
    public void consumerBatch(List<String> events) {
      sent.addAll(events);
    }

    /** The listener of a container bean the application built with the factory. */
    @IdempotentListener(name = "producer-batch-header-container-bean")
    public void containerBean(String event) {
      sent.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    HeaderKeyedListeners headerKeyedListeners() {
      return new HeaderKeyedListeners();
    }

    @Bean
    Declarables headerKeyedQueues() {
      return new Declarables(
          deadLettered(RECORD_QUEUE),
          QueueBuilder.nonDurable(RECORD_QUEUE + DEAD_LETTERS).build(),
          deadLettered(CONSUMER_BATCH_QUEUE),
          QueueBuilder.nonDurable(CONSUMER_BATCH_QUEUE + DEAD_LETTERS).build(),
          deadLettered(BEAN_QUEUE),
          QueueBuilder.nonDurable(BEAN_QUEUE + DEAD_LETTERS).build());
    }

    /**
     * A record listener's container that is a bean, built with Boot's factory ({@code
     * createListenerContainer()}, which the starter does not see created).
     */
    @Bean
    SimpleMessageListenerContainer headerKeyedContainerBean(
        @Qualifier("rabbitListenerContainerFactory") SimpleRabbitListenerContainerFactory factory,
        HeaderKeyedListeners listeners) {
      SimpleMessageListenerContainer container = factory.createListenerContainer();
      container.setQueueNames(BEAN_QUEUE);
      container.setReceiveTimeout(100L);
      container.setMessageListener(new MessageListenerAdapter(listeners, "containerBean"));
      return container;
    }

    /** A queue whose rejected messages go to its dead-letter queue (the default exchange). */
    private static Queue deadLettered(String name) {
      return QueueBuilder.nonDurable(name)
          .deadLetterExchange("")
          .deadLetterRoutingKey(name + DEAD_LETTERS)
          .build();
    }

    /** Consumer-side batches of up to ten messages. */
    @Bean
    SimpleRabbitListenerContainerFactory consumerBatchFactory(ConnectionFactory connectionFactory) {
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
    registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
    registry.add("spring.rabbitmq.port", () -> RabbitMqServer.shared().port());
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }

  private static ThreadPoolTaskScheduler scheduler;

  @Autowired ConnectionFactory connectionFactory;
  @Autowired RabbitTemplate plain;

  @BeforeAll
  static void startScheduler() {
    scheduler = new ThreadPoolTaskScheduler();
    scheduler.initialize();
  }

  @AfterAll
  static void stopScheduler() {
    scheduler.shutdown();
  }

  /**
   * A header-keyed record listener gets a producer's batch of two messages, each with its own
   * Idempotency-Key: the first is sent once with its own key; the second carries the first's key,
   * which is not its own, so it has no key (SPEC section 15): never sent, and the batch is rejected
   * without requeue (its dead-letter queue gets it). Failed before the fix: the second was
   * acknowledged as the first's replay, unsent, and nothing was dead-lettered (a lost send).
   */
  @Test
  void aProducerBatchToAHeaderKeyedRecordListenerSendsOnlyTheFirstAndDeadLettersTheBatch()
      throws Exception {
    sentThenDeadLettered(RECORD_QUEUE, "pr", 1);
  }

  /**
   * The same producer's batch, to a header-keyed consumer-side batch listener: the first message is
   * sent with its own key, the second has no key of its own, so it is never sent and the batch is
   * rejected without requeue (dead-lettered). Failed before the fix as above.
   */
  @Test
  void aProducerBatchToAHeaderKeyedConsumerBatchListenerSendsOnlyTheFirstAndDeadLettersTheBatch()
      throws Exception {
    sentThenDeadLettered(CONSUMER_BATCH_QUEUE, "pc", 1);
  }

  /** The same producer's batch, to a header-keyed record listener's container bean: as above. */
  @Test
  void aProducerBatchToAHeaderKeyedContainerBeanSendsOnlyTheFirstAndDeadLettersTheBatch()
      throws Exception {
    sentThenDeadLettered(BEAN_QUEUE, "pb", 1);
  }

  private void sentThenDeadLettered(String queue, String prefix, int firstSends) throws Exception {
    String first = unique(prefix + "-first");
    String second = unique(prefix + "-second");
    publishBatch(queue, List.of(first, second));
    Message deadLetter = plain.receive(queue + DEAD_LETTERS, 45_000);
    assertThat(deadLetter).as("the producer's batch, dead-lettered").isNotNull();
    // the batch's delivery is over once a message published behind it on its own has been sent
    String marker = unique(prefix + "-marker");
    plain.send("", queue, message(marker));
    await("the marker sent", () -> sent(marker) >= 1);

    assertThat(new int[] {sent(first), sent(second)})
        .as("provider sends of first, second (one producer batch, each its own key)")
        .containsExactly(firstSends, 0);
  }

  private static int sent(String event) {
    return (int) HeaderKeyedListeners.sent.stream().filter(event::equals).count();
  }

  /** One producer batch: the messages are sent together, as one AMQP message. */
  private void publishBatch(String queue, List<String> payloads) {
    BatchingRabbitTemplate template =
        new BatchingRabbitTemplate(
            connectionFactory,
            new SimpleBatchingStrategy(payloads.size(), 1_000_000, 60_000),
            scheduler);
    try {
      for (String payload : payloads) {
        template.send("", queue, message(payload));
      }
      template.flush();
    } finally {
      template.stop();
    }
  }

  /** A message keyed by its own Idempotency-Key header. */
  private static Message message(String payload) {
    MessageProperties properties = new MessageProperties();
    properties.setContentType(MessageProperties.CONTENT_TYPE_TEXT_PLAIN);
    properties.setHeader("Idempotency-Key", "key-" + payload);
    return new Message(payload.getBytes(StandardCharsets.UTF_8), properties);
  }

  private static String unique(String what) {
    return what + "-" + UUID.randomUUID();
  }

  /** Bounded polling: generous, the machine is busy. */
  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + 45_000_000_000L;
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after 45 s waiting for " + what);
      }
      Thread.sleep(20);
    }
  }
}
