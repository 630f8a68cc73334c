package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.List;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.TopicPartition;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.util.backoff.FixedBackOff;

/**
 * The entry-point suite's Kafka application, on the messaging tests' shared in-JVM broker ({@link
 * dev.idempotency.spring.messaging.EmbeddedKafka}): one {@code @KafkaListener}, a record listener
 * or (property {@code suite.kafka.batch=true}) a batch listener, keyed by the {@code
 * Idempotency-Key} header, sending its payload through the {@link SuiteProvider}. Its topic (and
 * consumer group) is a property, so that an application started for one test never shares a group
 * with the shared one. The error handler is the one the Kafka messaging test's application has:
 * three tries, then the {@code .DLT} topic.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
@Import(SuiteBeans.class)
public class SuiteKafkaApplication {

  /** The record listener's name, the operation of its keys. */
  static final String LISTENER = "suite-kafka-record";

  /** The batch listener's name (property {@code suite.kafka.batch=true}). */
  static final String BATCH_LISTENER = "suite-kafka-batch";

  @Bean
  Events events() {
    return new Events();
  }

  @Bean
  NewTopic suiteTopic(@Value("${suite.kafka.topic}") String topic) {
    return new NewTopic(topic, 1, (short) 1);
  }

  @Bean
  NewTopic suiteDeadLetterTopic(@Value("${suite.kafka.topic}") String topic) {
    return new NewTopic(topic + ".DLT", 1, (short) 1);
  }

  @Bean
  ConsumerFailures consumerFailures() {
    return new ConsumerFailures();
  }

  /**
   * The application's own handler: 3 tries, then the dead-letter topic; the consumer's failures
   * outside the listener (a poll or a commit that threw) are noted in {@code failures}.
   */
  @Bean
  CommonErrorHandler errorHandler(
      KafkaTemplate<Object, Object> template, ConsumerFailures failures) {
    return new DefaultErrorHandler(
        new DeadLetterPublishingRecoverer(
            template, (record, failure) -> new TopicPartition(record.topic() + ".DLT", 0)),
        new FixedBackOff(0, 2)) {
      @Override
      public void handleOtherException(
          Exception thrownException,
          Consumer<?, ?> consumer,
          MessageListenerContainer container,
          boolean batchListener) {
        failures.add(String.valueOf(thrownException));
        super.handleOtherException(thrownException, consumer, container, batchListener);
      }
    };
  }

  @Bean
  @ConditionalOnProperty(name = "suite.kafka.batch", havingValue = "false", matchIfMissing = true)
  RecordListener recordListener(SuiteProvider provider) {
    return new RecordListener(provider);
  }

  @Bean
  @ConditionalOnProperty(name = "suite.kafka.batch", havingValue = "true")
  BatchListener batchListener(SuiteProvider provider) {
    return new BatchListener(provider);
  }

  /** The listener: the payload is what it sends, the header its key. */
  public static class RecordListener {
    private final SuiteProvider provider;

    RecordListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(id = LISTENER, topics = "${suite.kafka.topic}", groupId = "${suite.kafka.topic}")
    @IdempotentListener(name = LISTENER)
    public void record(String payload) {
      provider.send(payload);
    }
  }

  /**
   * The batch listener: each payload of the list it gets (the messages not sent yet) is sent, each
   * message keyed by its own header.
   */
  public static class BatchListener {
    private final SuiteProvider provider;

    BatchListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = BATCH_LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = BATCH_LISTENER)
    public void batch(List<String> payloads) {
      for (int i = 0; i < payloads.size(); i++) {
        try {
          provider.send(payloads.get(i));
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        }
      }
    }
  }
}
