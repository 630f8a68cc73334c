package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.BatchListenerFailedException;
import org.springframework.kafka.listener.adapter.RecordFilterStrategy;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.handler.annotation.Header;

/**
 * probeW, of fixhdr de81b58a ({@code BatchHeaderArguments}), on the shared in-JVM KRaft broker: the
 * shapes of a guarded Kafka batch listener's per-message header arguments beside its list, once a
 * message sent before is skipped. Each record's Kafka key names the message's recipient; the
 * guard's key is the {@code Idempotency-Key} header. One application, a topic per listener:
 *
 * <ul>
 *   <li>the record keys taken as an array ({@code @Header(KafkaHeaders.RECEIVED_KEY) String[]},
 *       which Spring's conversion service makes from the container's list);
 *   <li>a {@code BatchListenerFailedException} by index in the list the listener got, behind a
 *       {@code RecordFilterStrategy}, after a replay: the index must map back to the container's
 *       record, never commit a message not sent;
 *   <li>a batch with one key twice (different recipients), and a batch of replays only.
 * </ul>
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class KafkaBatchHeaderShapesProbeTest {

  static final String ARRAY = "probe-w-header-array";
  static final String FAILED = "probe-w-header-failed-index";
  static final String DUPLICATES = "probe-w-header-duplicates";

  private KafkaListenerApplication application;
  private String topic;

  @BeforeAll
  void start() {
    topic = "idem.probe-w-header-shapes-" + UUID.randomUUID();
    application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            new SuiteProvider(),
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {ShapeListeners.class});
  }

  @AfterAll
  void stop() {
    if (application != null) {
      application.close();
    }
  }

  /*
   * Was an open finding (probeW, of fixhdr de81b58a, on 98c59631; Boot 3.5.7 and 4.0.7, the same
   * on both; severity high: a send to the wrong recipient and a lost send, SPEC 1 and 15, for any
   * guarded batch listener that takes a batch's header as an array, whenever a batch holds a
   * message sent before). Expected: message b sent once, to recipient-of-b. Happened: "[b-… ->
   * recipient-of-a]"; the listener's calls (list / key array / offset array): "[a-…] /
   * [recipient-of-a] / [0]", then "[b-…] / [recipient-of-a, recipient-of-b] / [1, 2]". Why:
   * BatchHeaderArguments filtered a @Header argument only where the value resolved for it is a
   * java.util.List; for a parameter of an array type Spring's conversion service has already
   * turned the container's list into an array, one entry per record of the container's list, and
   * it was passed as it is while the list holds only the messages to send. Fixed (fixarr): an
   * array of the batch's length is cut by the same indexes as a list (seen failing as above on
   * Boot 3.5 before the fix, then passing on 3.5 and 4.0). A Collection type that is not a List (a
   * Set, converted) or a joined String cannot be aligned: documented, take a List or an array.
   */
  @Test
  void recordKeysTakenAsAnArrayStayAlignedWithTheMessagesHandedOut() throws Exception {
    String id = UUID.randomUUID().toString();
    String a = "a-" + id;
    String b = "b-" + id;
    String arrayTopic = topic + ".array";
    publishInOneBatch(arrayTopic, new Message(a, a, "recipient-of-a", false));
    Waits.await(
        "message a sent", () -> ShapeListener.sent(ARRAY).contains(a + " -> recipient-of-a"));
    publishInOneBatch(
        arrayTopic,
        new Message(a, a, "recipient-of-a", false),
        new Message(b, b, "recipient-of-b", false));
    Waits.await(
        "message b sent",
        () -> ShapeListener.sent(ARRAY).stream().anyMatch(s -> s.startsWith(b + " ")));

    assertThat(ShapeListener.sent(ARRAY).stream().filter(s -> s.startsWith(b + " ")).toList())
        .as(
            "sends of message b (the listener's calls, each its list, its key array and its"
                + " offset array: %s)",
            ShapeListener.calls(ARRAY))
        .containsExactly(b + " -> recipient-of-b");
  }

  /**
   * A batch [x (filtered out), a (sent before), b, c]: the listener gets [b, c] and fails once at c
   * by its index in that list (1), the container's index of a. Message b must be sent once, to its
   * recipient, and c once (after its redelivery), to its own, with nothing dead-lettered: a wrong
   * index that commits c unsent is a lost send, one that brings b back unrecorded a second.
   */
  @Test
  void aFailureNamedByIndexAfterTheCutComesBackFromTheFailedMessage() throws Exception {
    String id = UUID.randomUUID().toString();
    String x = "x-" + id;
    String a = "a-" + id;
    String b = "b-" + id;
    String c = "fail-c-" + id;
    String failedTopic = topic + ".failed";
    publishInOneBatch(failedTopic, new Message(a, a, "recipient-of-a", false));
    Waits.await(
        "message a sent", () -> ShapeListener.sent(FAILED).contains(a + " -> recipient-of-a"));
    publishInOneBatch(
        failedTopic,
        new Message(x, x, "recipient-of-x", true),
        new Message(a, a, "recipient-of-a", false),
        new Message(b, b, "recipient-of-b", false),
        new Message(c, c, "recipient-of-c", false));
    Waits.await(
        "message c sent after its failure",
        () -> ShapeListener.sent(FAILED).stream().anyMatch(s -> s.startsWith(c + " ")));
    // a later batch behind it: every message before it was handled when it is
    String d = "d-" + id;
    publishInOneBatch(failedTopic, new Message(d, d, "recipient-of-d", false));
    Waits.await(
        "message d sent", () -> ShapeListener.sent(FAILED).contains(d + " -> recipient-of-d"));

    List<String> sent = ShapeListener.sent(FAILED);
    List<?> calls = ShapeListener.calls(FAILED);
    assertThat(sent.stream().filter(s -> s.contains(id)).toList())
        .as("the sends of the batch's messages (the listener's calls: %s)", calls)
        .containsExactly(
            a + " -> recipient-of-a",
            b + " -> recipient-of-b",
            c + " -> recipient-of-c",
            d + " -> recipient-of-d");
    assertThat(deadLettered(failedTopic).stream().filter(s -> s.contains(id)).toList())
        .as("dead-lettered")
        .isEmpty();
  }

  /**
   * A batch [c (to recipient 1), c again (to recipient 2), d]: one send per key, so c goes once (to
   * the first one's recipient) and d to its own; then a batch [c, d] of replays only: no send, no
   * call with a message.
   */
  @Test
  void aKeyTwiceInABatchAndABatchOfReplaysOnlyKeepTheRecipients() throws Exception {
    String id = UUID.randomUUID().toString();
    String c = "c-" + id;
    String d = "d-" + id;
    String duplicatesTopic = topic + ".duplicates";
    publishInOneBatch(
        duplicatesTopic,
        new Message(c, c + "-1", "recipient-1-of-c", false),
        new Message(c, c + "-2", "recipient-2-of-c", false),
        new Message(d, d, "recipient-of-d", false));
    Waits.await(
        "message d sent",
        () -> ShapeListener.sent(DUPLICATES).stream().anyMatch(s -> s.startsWith(d + " ")));
    publishInOneBatch(
        duplicatesTopic,
        new Message(c, c + "-3", "recipient-3-of-c", false),
        new Message(d, d + "-2", "recipient-2-of-d", false));
    Waits.await(
        "both replayed",
        () ->
            application.events().count(IdempotencyEvent.Type.REPLAYED, DUPLICATES, c) >= 1
                && application.events().count(IdempotencyEvent.Type.REPLAYED, DUPLICATES, d) >= 1);
    // a later batch behind them: the replays' batch was handled when it is
    String e = "e-" + id;
    publishInOneBatch(duplicatesTopic, new Message(e, e, "recipient-of-e", false));
    Waits.await(
        "message e sent", () -> ShapeListener.sent(DUPLICATES).contains(e + " -> recipient-of-e"));

    assertThat(ShapeListener.sent(DUPLICATES).stream().filter(s -> s.contains(id)).toList())
        .as("the sends (the listener's calls: %s)", ShapeListener.calls(DUPLICATES))
        .containsExactly(
            c + "-1 -> recipient-1-of-c", d + " -> recipient-of-d", e + " -> recipient-of-e");
  }

  /** The payloads on {@code of}'s dead-letter topic (the suite's handler: partition 0). */
  @SuppressWarnings("unchecked")
  private List<String> deadLettered(String of) {
    ConsumerFactory<String, String> consumers =
        application.context().getBean(ConsumerFactory.class);
    TopicPartition partition = new TopicPartition(of + ".DLT", 0);
    List<String> payloads = new ArrayList<>();
    try (Consumer<String, String> consumer =
        consumers.createConsumer("probe-w-dlt-reader-" + UUID.randomUUID(), null)) {
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      long end = consumer.endOffsets(List.of(partition)).get(partition);
      while (consumer.position(partition) < end) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
          payloads.add(record.value());
        }
      }
    }
    return payloads;
  }

  private record Message(String key, String payload, String recipient, boolean skip) {}

  /**
   * Publishes the messages in one record batch of partition 0, each keyed by its recipient (the
   * Kafka key) and for the guard by {@code Idempotency-Key}, so that one poll gets them all.
   */
  @SuppressWarnings("unchecked")
  private void publishInOneBatch(String to, Message... messages) throws Exception {
    Map<String, Object> configs =
        new HashMap<>(
            application.context().getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    try (Producer<String, String> producer = new KafkaProducer<>(configs)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (Message message : messages) {
        ProducerRecord<String, String> record =
            new ProducerRecord<>(to, 0, message.recipient(), message.payload());
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

  @Configuration(proxyBeanMethods = false)
  static class ShapeListeners {
    @Bean
    ShapeListener probeWShapeListener() {
      return new ShapeListener();
    }

    @Bean
    NewTopic probeWArrayTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".array", 1, (short) 1);
    }

    @Bean
    NewTopic probeWFailedTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".failed", 1, (short) 1);
    }

    @Bean
    NewTopic probeWFailedDeadLetterTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".failed.DLT", 1, (short) 1);
    }

    @Bean
    NewTopic probeWDuplicatesTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".duplicates", 1, (short) 1);
    }

    /** Drops the records that carry a {@code skip} header. */
    @Bean
    RecordFilterStrategy<String, String> probeWSkipMarked() {
      return record -> record.headers().lastHeader("skip") != null;
    }
  }

  /** Sends each payload to the recipient its record's key names; notes each call. */
  public static class ShapeListener {
    // static: the bean the context holds is the guard's proxy
    static final Map<String, List<String>> sent = new ConcurrentHashMap<>();
    static final Map<String, List<String>> calls = new ConcurrentHashMap<>();
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    static List<String> sent(String listener) {
      return sent.computeIfAbsent(listener, any -> new CopyOnWriteArrayList<>());
    }

    static List<String> calls(String listener) {
      return calls.computeIfAbsent(listener, any -> new CopyOnWriteArrayList<>());
    }

    @KafkaListener(
        id = ARRAY,
        topics = "${suite.kafka.topic}.array",
        groupId = "${suite.kafka.topic}.array",
        batch = "true")
    @IdempotentListener(name = ARRAY)
    public void array(
        List<String> payloads,
        @Header(KafkaHeaders.RECEIVED_KEY) String[] recipients,
        @Header(KafkaHeaders.OFFSET) long[] offsets) {
      calls(ARRAY)
          .add(
              List.copyOf(payloads)
                  + " / "
                  + List.of(recipients)
                  + " / "
                  + java.util.Arrays.toString(offsets));
      for (int i = 0; i < payloads.size(); i++) {
        sent(ARRAY).add(payloads.get(i) + " -> " + recipients[i]);
      }
    }

    @KafkaListener(
        id = FAILED,
        topics = "${suite.kafka.topic}.failed",
        groupId = "${suite.kafka.topic}.failed",
        batch = "true",
        filter = "probeWSkipMarked")
    @IdempotentListener(name = FAILED)
    public void failedIndex(
        List<String> payloads, @Header(KafkaHeaders.RECEIVED_KEY) List<String> recipients) {
      calls(FAILED).add(List.copyOf(payloads) + " / " + recipients);
      for (int i = 0; i < payloads.size(); i++) {
        String payload = payloads.get(i);
        if (payload.startsWith("fail-") && failedOnce.add(payload)) {
          throw new BatchListenerFailedException("the provider failed once", i);
        }
        sent(FAILED).add(payload + " -> " + recipients.get(i));
      }
    }

    @KafkaListener(
        id = DUPLICATES,
        topics = "${suite.kafka.topic}.duplicates",
        groupId = "${suite.kafka.topic}.duplicates",
        batch = "true")
    @IdempotentListener(name = DUPLICATES)
    public void duplicates(
        List<String> payloads, @Header(KafkaHeaders.RECEIVED_KEY) List<String> recipients) {
      calls(DUPLICATES).add(List.copyOf(payloads) + " / " + recipients);
      for (int i = 0; i < payloads.size(); i++) {
        sent(DUPLICATES).add(payloads.get(i) + " -> " + recipients.get(i));
      }
    }
  }
}
