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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.handler.annotation.Header;

/**
 * probeX, of fixarr 212f9559 ({@code BatchHeaderArguments} cuts {@code @Header} arrays of the
 * batch's length like lists), on the shared in-JVM KRaft broker: a guarded Kafka batch listener
 * behind a {@code RecordFilterStrategy}, taking the record keys ({@code String[]}, each record's
 * recipient) and offsets ({@code long[]}) as arrays beside its payload list. The filter makes the
 * list the listener's adapter builds shorter than the polled batch; the arrays must be cut to the
 * messages handed out of that filtered list, never of the polled one: each send goes to its own
 * recipient, with its own offset, once.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class KafkaProbeXFilteredHeaderArraysProbeTest {

  static final String FILTERED = "probe-x-filtered-arrays";

  private KafkaListenerApplication application;
  private String topic;

  @BeforeAll
  void start() {
    topic = "idem.probe-x-filtered-arrays-" + UUID.randomUUID();
    application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            new SuiteProvider(),
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {FilteredListeners.class});
  }

  @AfterAll
  void stop() {
    if (application != null) {
      application.close();
    }
  }

  /**
   * A batch [x (filtered out), a (sent before), y (filtered out), b, e, a again, e again (another
   * recipient), c]: the listener's adapter gets [a, b, e, a, e, c], the listener [b, e, c]; each
   * must go to its own recipient with its own offset, once (e to its first copy's), a never again.
   */
  @Tag("extended") // CI time: its own application and broker topics, 22 to 29 s on a busy machine
  @Test
  void filteredBatchHeaderArraysStayAlignedWithTheMessagesHandedOut() throws Exception {
    String id = UUID.randomUUID().toString();
    String a = "a-" + id;
    String b = "b-" + id;
    String c = "c-" + id;
    String x = "x-" + id;
    String y = "y-" + id;
    String e = "e-" + id;
    Map<String, Long> first = publishInOneBatch(new Message(a, a, "recipient-of-a", false));
    Waits.await("message a sent", () -> sent().contains(line(a, "recipient-of-a", first.get(a))));
    Map<String, Long> offsets =
        publishInOneBatch(
            new Message(x, x, "recipient-of-x", true),
            new Message(a, a + "-again", "recipient-2-of-a", false),
            new Message(y, y, "recipient-of-y", true),
            new Message(b, b, "recipient-of-b", false),
            new Message(e, e, "recipient-of-e", false),
            new Message(a, a + "-third", "recipient-3-of-a", false),
            new Message(e, e + "-again", "recipient-2-of-e", false),
            new Message(c, c, "recipient-of-c", false));
    Waits.await("message c sent", () -> sent().stream().anyMatch(s -> s.startsWith(c + " ")));
    String d = "d-" + id;
    Map<String, Long> last = publishInOneBatch(new Message(d, d, "recipient-of-d", false));
    Waits.await("message d sent", () -> sent().contains(line(d, "recipient-of-d", last.get(d))));

    assertThat(sent().stream().filter(s -> s.contains(id)).toList())
        .as("the sends (the listener's calls, each its list / key array / offset array: %s)", calls)
        .containsExactly(
            line(a, "recipient-of-a", first.get(a)),
            line(b, "recipient-of-b", offsets.get(b)),
            line(e, "recipient-of-e", offsets.get(e)),
            line(c, "recipient-of-c", offsets.get(c)),
            line(d, "recipient-of-d", last.get(d)));
  }

  static String line(String payload, String recipient, Long offset) {
    return payload + " -> " + recipient + " @" + offset;
  }

  static List<String> sent() {
    return sent;
  }

  static final List<String> sent = new CopyOnWriteArrayList<>();
  static final List<String> calls = new CopyOnWriteArrayList<>();

  private record Message(String key, String payload, String recipient, boolean skip) {}

  /**
   * Publishes the messages in one record batch of partition 0, each keyed by its recipient (the
   * Kafka key) and for the guard by {@code Idempotency-Key}; the offset of each message, by
   * payload.
   */
  @SuppressWarnings("unchecked")
  private Map<String, Long> publishInOneBatch(Message... messages) throws Exception {
    Map<String, Object> configs =
        new HashMap<>(
            application.context().getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    Map<String, Long> offsets = new ConcurrentHashMap<>();
    try (Producer<String, String> producer = new KafkaProducer<>(configs)) {
      List<Future<RecordMetadata>> futures = new ArrayList<>();
      for (Message message : messages) {
        ProducerRecord<String, String> record =
            new ProducerRecord<>(topic + ".filtered", 0, message.recipient(), message.payload());
        record.headers().add("Idempotency-Key", message.key().getBytes(StandardCharsets.UTF_8));
        if (message.skip()) {
          record.headers().add("skip", new byte[] {1});
        }
        futures.add(producer.send(record));
      }
      producer.flush();
      for (int i = 0; i < messages.length; i++) {
        offsets.put(messages[i].payload(), futures.get(i).get(30, TimeUnit.SECONDS).offset());
      }
    }
    return offsets;
  }

  @Configuration(proxyBeanMethods = false)
  static class FilteredListeners {
    @Bean
    FilteredListener probeXFilteredListener() {
      return new FilteredListener();
    }

    @Bean
    NewTopic probeXFilteredTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".filtered", 1, (short) 1);
    }

    /** Drops the records that carry a {@code skip} header. */
    @Bean
    RecordFilterStrategy<String, String> probeXSkipMarked() {
      return record -> record.headers().lastHeader("skip") != null;
    }
  }

  /** Sends each payload to the recipient its record's key names, noting its offset. */
  public static class FilteredListener {
    @KafkaListener(
        id = FILTERED,
        topics = "${suite.kafka.topic}.filtered",
        groupId = "${suite.kafka.topic}.filtered",
        batch = "true",
        filter = "probeXSkipMarked")
    @IdempotentListener(name = FILTERED)
    public void filtered(
        List<String> payloads,
        @Header(KafkaHeaders.RECEIVED_KEY) String[] recipients,
        @Header(KafkaHeaders.OFFSET) long[] offsets) {
      calls.add(
          List.copyOf(payloads)
              + " / "
              + List.of(recipients)
              + " / "
              + java.util.Arrays.toString(offsets));
      for (int i = 0; i < payloads.size(); i++) {
        sent.add(line(payloads.get(i), recipients[i], offsets[i]));
      }
    }
  }
}
