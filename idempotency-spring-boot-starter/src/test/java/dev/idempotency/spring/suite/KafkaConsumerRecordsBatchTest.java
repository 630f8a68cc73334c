package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * A Kafka batch {@code @IdempotentListener} whose parameter is Spring Kafka's {@code
 * ConsumerRecords<K, V>} (a batch listener signature Spring Kafka supports), keyed by the {@code
 * Idempotency-Key} header. probe42l's finding: it was accepted at startup, run as a record
 * listener, found no key header and dead-lettered every message unsent. SPEC 15: a listener whose
 * key cannot be worked out fails the start, with a message that names it and says what to take
 * instead.
 */
class KafkaConsumerRecordsBatchTest {

  static final String LISTENER = "kafka-consumer-records";

  @Test
  void aConsumerRecordsBatchListenerIsRefusedAtStart() {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.consumer-records-" + UUID.randomUUID();
    assertThatThrownBy(
            () ->
                KafkaListenerApplication.start(
                        new SwitchableKeyStore(),
                        provider,
                        new CountDownLatch(1),
                        topic,
                        "none",
                        new Class<?>[] {RecordsListeners.class})
                    .close())
        .hasStackTraceContaining(RecordsListener.class.getName() + ".records(..)")
        .hasStackTraceContaining("takes its batch as Kafka's ConsumerRecords")
        .hasStackTraceContaining("List<ConsumerRecord<K, V>>");
    assertThat(provider.sends(LISTENER)).as("sends").isZero();
  }

  @Test
  void aListenerThatTheFactoryMakesABatchListenerWithNoListFailsTheStart() {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.factory-batch-collection-" + UUID.randomUUID();
    assertThatThrownBy(
            () ->
                KafkaListenerApplication.start(
                        new SwitchableKeyStore(),
                        provider,
                        new CountDownLatch(1),
                        topic,
                        "none",
                        new Class<?>[] {CollectionListeners.class},
                        "spring.kafka.listener.type=batch")
                    .close())
        .hasStackTraceContaining(CollectionListener.class.getName() + ".payloads(..)")
        .hasStackTraceContaining("is a batch listener (its container factory is one")
        .hasStackTraceContaining("List<ConsumerRecord<K, V>>");
    assertThat(provider.sends(LISTENER)).as("sends").isZero();
  }

  /** A listener taking a Collection, made a batch listener by Boot's listener type only. */
  @Configuration(proxyBeanMethods = false)
  static class CollectionListeners {
    @Bean
    CollectionListener collectionListener(SuiteProvider provider) {
      return new CollectionListener(provider);
    }
  }

  /** Sends each payload of its batch. */
  public static class CollectionListener {
    private final SuiteProvider provider;

    CollectionListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = LISTENER + "-collection",
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}")
    @IdempotentListener(name = LISTENER + "-collection")
    public void payloads(java.util.Collection<String> payloads) {
      for (String payload : payloads) {
        provider.send(LISTENER);
      }
    }
  }

  /** The test's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class RecordsListeners {
    @Bean
    RecordsListener recordsListener(SuiteProvider provider) {
      return new RecordsListener(provider);
    }
  }

  /** Sends each record's value. */
  public static class RecordsListener {
    private final SuiteProvider provider;

    RecordsListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void records(ConsumerRecords<String, String> records) {
      for (ConsumerRecord<String, String> record : records) {
        provider.send(LISTENER);
      }
    }
  }
}
