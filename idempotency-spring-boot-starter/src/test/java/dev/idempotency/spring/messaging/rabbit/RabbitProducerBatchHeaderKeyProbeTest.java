package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.core.BatchingRabbitTemplate;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

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
class RabbitProducerBatchHeaderKeyProbeTest extends RabbitProbeSupport {

  static final String RECORD_QUEUE = "idem.producer-batch.header-record";
  static final String CONSUMER_BATCH_QUEUE = "idem.producer-batch.header-consumer-batch";
  static final String BEAN_QUEUE = "idem.producer-batch.header-container-bean";

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
      return deadLetteredQueues(RECORD_QUEUE, CONSUMER_BATCH_QUEUE, BEAN_QUEUE);
    }

    /**
     * A record listener's container that is a bean, built with Boot's factory ({@code
     * createListenerContainer()}, which the starter does not see created).
     */
    @Bean
    SimpleMessageListenerContainer headerKeyedContainerBean(
        @Qualifier("rabbitListenerContainerFactory") SimpleRabbitListenerContainerFactory factory,
        HeaderKeyedListeners listeners) {
      return factoryContainer(factory, BEAN_QUEUE, listeners, "containerBean");
    }

    /** Consumer-side batches of up to ten messages. */
    @Bean
    SimpleRabbitListenerContainerFactory consumerBatchFactory(ConnectionFactory connectionFactory) {
      return RabbitProbeSupport.consumerBatchFactory(connectionFactory);
    }
  }

  @Override
  List<String> sends() {
    return HeaderKeyedListeners.sent;
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
    publishBatch(queue, messages(List.of(first, second)));
    Message deadLetter = plain.receive(queue + DEAD_LETTERS, 45_000);
    assertThat(deadLetter).as("the producer's batch, dead-lettered").isNotNull();
    // the batch's delivery is over once a message published behind it on its own has been sent
    awaitMarker(queue, prefix);

    assertThat(new int[] {sent(first), sent(second)})
        .as("provider sends of first, second (one producer batch, each its own key)")
        .containsExactly(firstSends, 0);
  }
}
