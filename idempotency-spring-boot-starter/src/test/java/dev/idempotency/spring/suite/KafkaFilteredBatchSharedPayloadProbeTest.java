package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;

/**
 * Probe (probe42l, issue 37's left-overs): a Kafka batch {@code @IdempotentListener} behind a
 * {@code RecordFilterStrategy}, keyed by the {@code Idempotency-Key} header, whose records' values
 * are small {@code Integer}s (Kafka's {@code IntegerDeserializer} boxes them, so equal values are
 * one cached object). docs/message-consumers.md: "Each message it gets is found among the polled
 * records ... so it is keyed by its own headers", and {@code List<ConsumerRecord<K, V>>} is the
 * shape it recommends where payloads cannot be matched.
 *
 * <p>One poll holds record 0 (value 7, key {@code a}, filtered out) and record 1 (value 7, key
 * {@code b}). The listener gets record 1 only and sends it. Then {@code a} is published unfiltered
 * (its first delivery that reaches the listener: it must be sent), then {@code b} again (a
 * republished copy: it must be a replay). SPEC 1: one send per key, none lost.
 *
 * <p>Open finding: {@code Delivery.positionsOf} matches a listener element to a polled record by
 * the identity of its value, so record 1 is found at record 0's place and read with record 0's
 * headers: key {@code a} is recorded as sent (its real message then replayed, never sent) and
 * {@code b} is sent again when republished.
 */
@Tag("open-finding")
class KafkaFilteredBatchSharedPayloadProbeTest {

  static final String LISTENER = "probe-kafka-filtered-ints";

  @ParameterizedTest
  @ValueSource(strings = {"records", "payloads"})
  void aFilteredRecordWithAnEqualSmallValueDoesNotLendItsKeyToTheNextOne(String shape)
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-filtered-ints-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {IntListeners.class},
            "spring.kafka.consumer.value-deserializer="
                + "org.apache.kafka.common.serialization.IntegerDeserializer",
            "probe.shape=" + shape)) {
      String name = LISTENER + "-" + shape;
      String a = "probe-int-a-" + UUID.randomUUID();
      String b = "probe-int-b-" + UUID.randomUUID();
      String sent = "probe-int-sends-" + UUID.randomUUID();
      IntListener listener = application.context().getBean(IntListener.class);
      listener.countAs(sent);

      publish(application, new Message(a, 7, true), new Message(b, 7, false));
      application.awaitAcknowledged();
      Waits.await("the batch's send", () -> provider.sends(sent) >= 1);
      assertThat(provider.sends(sent)).as("sends after the first poll (b only)").isEqualTo(1);
      if (shape.equals("records")) {
        assertThat(listener.keysSent()).as("the keys the listener sent").containsExactly(b);
      }

      // a's first delivery the filter lets through: it was never sent, so it must be sent now
      publish(application, new Message(a, 7, false));
      application.awaitAcknowledged();
      Waits.await(
          "a sent, or replayed",
          () ->
              provider.sends(sent) >= 2
                  || application
                          .events()
                          .count(dev.idempotency.IdempotencyEvent.Type.REPLAYED, name, a)
                      >= 1);
      int afterA = provider.sends(sent);

      // b republished: a replay
      publish(application, new Message(b, 7, false));
      application.awaitAcknowledged();
      Waits.await(
          "b replayed, or sent again",
          () ->
              provider.sends(sent) > afterA
                  || application
                          .events()
                          .count(dev.idempotency.IdempotencyEvent.Type.REPLAYED, name, b)
                      >= 1);
      int afterB = provider.sends(sent);
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(afterA)
                .as("sends once a arrived unfiltered (a was never sent before: a replay loses it)")
                .isEqualTo(2);
            softly
                .assertThat(afterB - afterA)
                .as("sends of b's republished copy (b was sent before: a second send)")
                .isZero();
          });
    }
  }

  private record Message(String key, int value, boolean skip) {}

  /** Publishes the messages in one record batch, Integer values, so that one poll gets them all. */
  @SuppressWarnings("unchecked")
  private static void publish(KafkaListenerApplication application, Message... messages)
      throws Exception {
    Map<String, Object> configs =
        new HashMap<>(
            application.context().getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    configs.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
    configs.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, IntegerSerializer.class);
    String topic = application.context().getEnvironment().getRequiredProperty("suite.kafka.topic");
    try (Producer<String, Integer> producer = new KafkaProducer<>(configs)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (Message message : messages) {
        ProducerRecord<String, Integer> record = new ProducerRecord<>(topic, message.value());
        record.headers().add("Idempotency-Key", message.key().getBytes(StandardCharsets.UTF_8));
        if (message.skip()) {
          record.headers().add("skip", new byte[] {1});
        }
        sent.add(producer.send(record));
      }
      producer.flush();
      for (Future<RecordMetadata> each : sent) {
        each.get(30, TimeUnit.SECONDS);
      }
    }
  }

  /** The probe's listener and filter, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class IntListeners {
    @Bean
    IntListener intListener(SuiteProvider provider, @Value("${probe.shape}") String shape) {
      return new IntListener(provider, shape);
    }

    /** Drops the records that carry a {@code skip} header. */
    @Bean
    RecordFilterStrategy<String, Integer> skipMarked() {
      return record -> record.headers().lastHeader("skip") != null;
    }
  }

  /** Sends each message of its batch, counted under one name; notes the header keys it sent. */
  public static class IntListener {
    private final SuiteProvider provider;
    private final String shape;
    private final List<String> keysSent = new java.util.concurrent.CopyOnWriteArrayList<>();
    private volatile String countAs = "unset";

    IntListener(SuiteProvider provider, String shape) {
      this.provider = provider;
      this.shape = shape;
    }

    void countAs(String name) {
      countAs = name;
    }

    List<String> keysSent() {
      return keysSent;
    }

    @KafkaListener(
        id = LISTENER + "-records",
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true",
        filter = "skipMarked",
        autoStartup = "#{'${probe.shape}' == 'records'}")
    @IdempotentListener(name = LISTENER + "-records")
    public void records(List<ConsumerRecord<String, Integer>> records) {
      for (ConsumerRecord<String, Integer> record : records) {
        Header key = record.headers().lastHeader("Idempotency-Key");
        keysSent.add(new String(key.value(), StandardCharsets.UTF_8));
        provider.send(countAs);
      }
    }

    @KafkaListener(
        id = LISTENER + "-payloads",
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true",
        filter = "skipMarked",
        autoStartup = "#{'${probe.shape}' == 'payloads'}")
    @IdempotentListener(name = LISTENER + "-payloads")
    public void payloads(List<Integer> values) {
      for (Integer value : values) {
        provider.send(countAs);
      }
    }
  }
}
