package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;

/**
 * A Kafka batch {@code @IdempotentListener} behind a {@code RecordFilterStrategy}, keyed by the
 * {@code Idempotency-Key} header, whose records' values are small {@code Integer}s (Kafka's {@code
 * IntegerDeserializer} boxes them, so equal values are one cached object). probe42l's finding
 * (issue 37): a listener element was matched to a polled record by the identity of its value, so a
 * filtered record's key was lent to the next record of an equal value: that key recorded as sent
 * (its own message later replayed, never sent) and the other sent twice.
 *
 * <p>One poll holds record 0 (value 7, key {@code a}, filtered out) and record 1 (value 7, key
 * {@code b}). Then {@code a} is published unfiltered (its first delivery that reaches the listener:
 * it must be sent), then {@code b} again (a republished copy: it must be a replay). SPEC 1: one
 * send per key, none lost. A listener of {@code ConsumerRecord}s or {@code Message}s is matched by
 * the record itself (or its topic, partition and offset); one of bare payloads cannot be, so its
 * delivery is deferred with a WARN that says to take records, and nothing is sent or dead-lettered.
 * A fourth listener, unfiltered, is probe42l's second finding: two messages whose values are one
 * object may not share a provider key through {@code IdempotentDelivery.context(element)}. One
 * application runs the four listeners, each on a topic of its own.
 */
@ExtendWith(OutputCaptureExtension.class)
class KafkaFilteredBatchSharedPayloadTest {

  static final String LISTENER = "kafka-filtered-ints";

  @Test
  void aFilteredRecordWithAnEqualSmallValueDoesNotLendItsKeyToTheNextOne(CapturedOutput output)
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.filtered-ints-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {IntListeners.class},
            "spring.kafka.consumer.value-deserializer="
                + "org.apache.kafka.common.serialization.IntegerDeserializer")) {
      IntListener listener = application.context().getBean(IntListener.class);
      for (String shape : List.of("records", "messages")) {
        eachKeySentOnce(application, provider, listener, topic, shape);
      }

      // bare payloads: neither record may be read with the other's key; the delivery waits
      String a = "int-a-" + UUID.randomUUID();
      String b = "int-b-" + UUID.randomUUID();
      String warning = "Listener " + LISTENER + "-payloads cannot run a delivery";
      publish(application, topic + ".payloads", new Message(a, 7, true), new Message(b, 7, false));
      Waits.await(
          "the payload listener's delivery deferred twice (it comes back)",
          () -> output.getAll().split(java.util.regex.Pattern.quote(warning), -1).length > 2);
      assertThat(output.getAll()).contains("List<ConsumerRecord<K, V>>");
      assertThat(provider.sends(LISTENER + "-payloads")).as("payload listener's sends").isZero();
      assertThat(listener.payloadCalls()).as("payload listener's calls").isZero();
      assertThat(
              application.events().count(IdempotencyEvent.Type.CLAIMED, LISTENER + "-payloads", a))
          .as("a claimed")
          .isZero();

      oneSharedPayloadObjectNeverGetsAnotherMessagesProviderKey(
          application, provider, listener, output);
    }
  }

  /**
   * probe42l's second finding (issue 37, no filter): keys a and b, both the Integer 7 (one object);
   * the listener copies its list, then sends each element with {@code
   * IdempotentDelivery.context(element).providerKey()}. Two elements that are one object cannot be
   * told apart: context(element) must refuse (saying to take records), never give a's send b's
   * provider key (a provider that deduplicates by it would drop a's message: a lost send).
   */
  private static void oneSharedPayloadObjectNeverGetsAnotherMessagesProviderKey(
      KafkaListenerApplication application,
      SuiteProvider provider,
      IntListener listener,
      CapturedOutput output)
      throws Exception {
    String topic = application.context().getEnvironment().getProperty("suite.kafka.topic");
    String a = "int-a-" + UUID.randomUUID();
    String b = "int-b-" + UUID.randomUUID();
    publish(application, topic + ".contexts", new Message(a, 7, false), new Message(b, 7, false));
    // the application's error handler tries a failed batch 3 times, then dead-letters it
    Waits.await(
        "contexts: two sends, or the batch's 3 tries refused",
        () -> listener.contextKeys().size() >= 2 || listener.contextFailures().size() >= 3);
    assertThat(listener.contextKeys())
        .as("contexts: the provider keys sent (never b's twice)")
        .doesNotHaveDuplicates()
        .isEmpty();
    assertThat(listener.contextFailures().get(0))
        .as("contexts: why context(element) refused")
        .contains("one object")
        .contains("List<ConsumerRecord<K, V>>");
    assertThat(provider.sends(LISTENER + "-contexts")).as("contexts: sends").isZero();
    assertThat(output.getAll())
        .as("contexts: the refusal logged, naming the listener")
        .contains("Listener " + LISTENER + "-contexts got one object as messages 0 and 1");
  }

  /** The flow of probe42l's probe for one listener shape: a is sent once, b once. */
  private static void eachKeySentOnce(
      KafkaListenerApplication application,
      SuiteProvider provider,
      IntListener listener,
      String topic,
      String shape)
      throws Exception {
    String name = LISTENER + "-" + shape;
    String shapeTopic = topic + "." + shape;
    String a = "int-a-" + UUID.randomUUID();
    String b = "int-b-" + UUID.randomUUID();

    publish(application, shapeTopic, new Message(a, 7, true), new Message(b, 7, false));
    Waits.await(shape + ": the batch's send", () -> provider.sends(name) >= 1);
    assertThat(provider.sends(name))
        .as(shape + ": sends after the first poll (b only)")
        .isEqualTo(1);
    assertThat(listener.keysSent(shape))
        .as(shape + ": the keys the listener sent")
        .containsExactly(b);

    // a's first delivery the filter lets through: it was never sent, so it must be sent now
    publish(application, shapeTopic, new Message(a, 7, false));
    Waits.await(
        shape + ": a sent, or replayed",
        () ->
            provider.sends(name) >= 2
                || application.events().count(IdempotencyEvent.Type.REPLAYED, name, a) >= 1);
    int afterA = provider.sends(name);

    // b republished: a replay
    publish(application, shapeTopic, new Message(b, 7, false));
    Waits.await(
        shape + ": b replayed, or sent again",
        () ->
            provider.sends(name) > afterA
                || application.events().count(IdempotencyEvent.Type.REPLAYED, name, b) >= 1);
    int afterB = provider.sends(name);
    SoftAssertions.assertSoftly(
        softly -> {
          softly
              .assertThat(afterA)
              .as(
                  shape
                      + ": sends once a arrived unfiltered (never sent before: a replay loses it)")
              .isEqualTo(2);
          softly
              .assertThat(afterB - afterA)
              .as(shape + ": sends of b's republished copy (sent before: a second send)")
              .isZero();
          softly
              .assertThat(listener.keysSent(shape))
              .as(shape + ": the keys the listener sent")
              .containsExactly(b, a);
        });
  }

  private record Message(String key, int value, boolean skip) {}

  /** Publishes the messages in one record batch, Integer values, so that one poll gets them all. */
  @SuppressWarnings("unchecked")
  private static void publish(
      KafkaListenerApplication application, String topic, Message... messages) throws Exception {
    Map<String, Object> configs =
        new HashMap<>(
            application.context().getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    configs.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
    configs.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, IntegerSerializer.class);
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

  /** The test's listeners and filter, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class IntListeners {
    @Bean
    IntListener intListener(SuiteProvider provider) {
      return new IntListener(provider);
    }

    /** Drops the records that carry a {@code skip} header. */
    @Bean
    RecordFilterStrategy<String, Integer> skipMarked() {
      return record -> record.headers().lastHeader("skip") != null;
    }
  }

  /** Sends each message of its batch, counted under its listener's name; notes the keys sent. */
  public static class IntListener {
    private final SuiteProvider provider;
    private final Map<String, List<String>> keysSent = new ConcurrentHashMap<>();
    private final AtomicInteger payloadCalls = new AtomicInteger();
    private final List<String> contextKeys = new CopyOnWriteArrayList<>();
    private final List<String> contextFailures = new CopyOnWriteArrayList<>();

    IntListener(SuiteProvider provider) {
      this.provider = provider;
    }

    List<String> keysSent(String shape) {
      return keysSent.getOrDefault(shape, List.of());
    }

    int payloadCalls() {
      return payloadCalls.get();
    }

    List<String> contextKeys() {
      return contextKeys;
    }

    List<String> contextFailures() {
      return contextFailures;
    }

    private void sent(String shape, byte[] key) {
      keysSent
          .computeIfAbsent(shape, any -> new CopyOnWriteArrayList<>())
          .add(new String(key, StandardCharsets.UTF_8));
      provider.send(LISTENER + "-" + shape);
    }

    @KafkaListener(
        id = LISTENER + "-records",
        topics = "${suite.kafka.topic}.records",
        groupId = "${suite.kafka.topic}.records",
        batch = "true",
        filter = "skipMarked")
    @IdempotentListener(name = LISTENER + "-records")
    public void records(List<ConsumerRecord<String, Integer>> records) {
      for (ConsumerRecord<String, Integer> record : records) {
        sent("records", record.headers().lastHeader("Idempotency-Key").value());
      }
    }

    @KafkaListener(
        id = LISTENER + "-messages",
        topics = "${suite.kafka.topic}.messages",
        groupId = "${suite.kafka.topic}.messages",
        batch = "true",
        filter = "skipMarked")
    @IdempotentListener(name = LISTENER + "-messages")
    public void messages(List<org.springframework.messaging.Message<Integer>> messages) {
      for (org.springframework.messaging.Message<Integer> message : messages) {
        Object key = message.getHeaders().get("Idempotency-Key");
        sent(
            "messages",
            key instanceof byte[] bytes
                ? bytes
                : String.valueOf(key).getBytes(StandardCharsets.UTF_8));
      }
    }

    @KafkaListener(
        id = LISTENER + "-payloads",
        topics = "${suite.kafka.topic}.payloads",
        groupId = "${suite.kafka.topic}.payloads",
        batch = "true",
        filter = "skipMarked")
    @IdempotentListener(name = LISTENER + "-payloads")
    public void payloads(List<Integer> values) {
      payloadCalls.incrementAndGet();
      for (Integer value : values) {
        provider.send(LISTENER + "-payloads");
      }
    }

    /** probe42l's listener: copies its list, then sends each element with its provider key. */
    @KafkaListener(
        id = LISTENER + "-contexts",
        topics = "${suite.kafka.topic}.contexts",
        groupId = "${suite.kafka.topic}.contexts",
        batch = "true")
    @IdempotentListener(name = LISTENER + "-contexts")
    public void contexts(List<Integer> values) {
      List<Integer> copy = new ArrayList<>(values);
      for (Integer value : copy) {
        String providerKey;
        try {
          providerKey = IdempotentDelivery.context(value).providerKey();
        } catch (IllegalStateException refused) {
          contextFailures.add(String.valueOf(refused.getMessage()));
          throw refused;
        }
        contextKeys.add(providerKey);
        provider.send(LISTENER + "-contexts");
      }
    }
  }
}
