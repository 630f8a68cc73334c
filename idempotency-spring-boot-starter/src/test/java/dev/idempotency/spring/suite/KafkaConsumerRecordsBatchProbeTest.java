package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probe42l): a Kafka batch {@code @IdempotentListener} whose parameter is Spring Kafka's
 * {@code ConsumerRecords<K, V>} (a batch listener signature Spring Kafka supports), keyed by the
 * {@code Idempotency-Key} header. SPEC 15: batch listeners are supported, and a listener whose key
 * cannot be worked out fails the start (docs/message-consumers.md). Either the start fails naming
 * the listener, or each message is sent once and none is dead-lettered.
 */
@Tag("open-finding")
class KafkaConsumerRecordsBatchProbeTest {

  static final String LISTENER = "probe-kafka-consumer-records";

  @Test
  void aConsumerRecordsBatchListenerIsRefusedAtStartOrSendsEachMessageOnce() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-consumer-records-" + UUID.randomUUID();
    KafkaListenerApplication application;
    try {
      application =
          KafkaListenerApplication.start(
              new SwitchableKeyStore(),
              provider,
              new CountDownLatch(1),
              topic,
              "none",
              new Class<?>[] {RecordsListeners.class});
    } catch (RuntimeException refused) {
      assertThat(refused).hasStackTraceContaining("RecordsListener");
      return; // refused at the start: held
    }
    try (application) {
      String[] keys = new String[3];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "probe-records-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      Waits.await(
          "each message sent, or something dead-lettered",
          () ->
              java.util.Arrays.stream(keys).allMatch(key -> provider.sends(key) >= 1)
                  || !application.deadLettered().isEmpty());
      assertThat(application.deadLettered()).as("dead-lettered").isEmpty();
      for (String key : keys) {
        assertThat(provider.sends(key)).as("sends of " + key).isEqualTo(1);
      }
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
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
        provider.send(record.value());
      }
    }
  }
}
