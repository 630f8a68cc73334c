package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ProducerFactory;

/**
 * Probe (probeA, of kafkatx b7400f9c): where a batch stops in a Kafka container transaction. The
 * topic has two partitions and one batch holds three messages of each; the listener (taking {@code
 * List<ConsumerRecord>}, keyed by the {@code Idempotency-Key} header) fails once, naming it ({@code
 * BatchDeliveryFailedException(i)}), at:
 *
 * <ul>
 *   <li>{@code second-partition}: the second record of the partition that comes second in the
 *       batch's list (the first partition's records all sent before it, and its offset must end
 *       after them while the second's ends at the stop);
 *   <li>{@code last}: the last record of the batch (the handler seeks back only that record);
 *   <li>{@code first}: the first record (nothing sent before the stop: the transaction rolls back
 *       as before kafkatx).
 * </ul>
 *
 * The promise (SPEC 1, 15): each of the six messages sent once; a marker published behind them on
 * each partition is sent after any redelivery.
 */
class KafkaTransactionStopPlacesProbeTest {

  static final String LISTENER = "probe-a-kafka-tx-stop-places";

  @Tag("extended") // its own application a row, 10 to 30 s a row
  @ParameterizedTest
  @ValueSource(strings = {"second-partition", "last", "first"})
  void aStopAnywhereInATwoPartitionBatchSendsEachOnce(String row) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String name = "probe-a-places-" + row;
    String topic = "idem." + name + "-" + UUID.randomUUID();
    try (Admin admin =
        Admin.create(
            Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, EmbeddedKafka.bootstrapServers()))) {
      admin
          .createTopics(List.of(new NewTopic(topic, 2, (short) 1)))
          .all()
          .get(60, TimeUnit.SECONDS);
    }
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {PlacesListeners.class},
            "spring.kafka.producer.transaction-id-prefix=" + name + UUID.randomUUID(),
            "spring.kafka.consumer.isolation-level=read-committed")) {
      PlacesListener listener = application.context().getBean(PlacesListener.class);
      listener.stopAt(row);
      List<String> keys = new ArrayList<>();
      List<Integer> partitions = new ArrayList<>();
      for (int p = 0; p < 2; p++) {
        for (int i = 0; i < 3; i++) {
          keys.add(name + "-p" + p + "-" + i + "-" + UUID.randomUUID());
          partitions.add(p);
        }
      }
      publishInOneBatch(application, topic, keys, partitions);
      awaitOrGoOn(
          "each message sent, or one sent twice",
          () ->
              keys.stream().allMatch(key -> provider.sends(key) >= 1)
                  || keys.stream().anyMatch(key -> provider.sends(key) >= 2));
      List<String> markers =
          List.of(
              name + "-marker-p0-" + UUID.randomUUID(), name + "-marker-p1-" + UUID.randomUUID());
      publishInOneBatch(application, topic, markers, List.of(0, 1));
      awaitOrGoOn(
          "the markers sent, or a message sent twice",
          () ->
              markers.stream().allMatch(key -> provider.sends(key) >= 1)
                  || keys.stream().anyMatch(key -> provider.sends(key) >= 2));
      String facts =
          row
              + ": listener calls: "
              + listener.calls()
              + ", first list: "
              + listener.firstList()
              + ", stopped at: "
              + listener.stopped()
              + ", sends (p0 0..2, p1 0..2): "
              + keys.stream().map(provider::sends).toList()
              + ", markers: "
              + markers.stream().map(provider::sends).toList();
      SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(listener.stopped())
                .as("the listener stopped (" + facts + ")")
                .isNotNull();
            for (String key : keys) {
              softly
                  .assertThat(provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isOne();
            }
            for (String marker : markers) {
              softly.assertThat(provider.sends(marker)).as("marker sent (" + facts + ")").isOne();
            }
          });
    }
  }

  /** Each message its own record of {@code partitions}, all in one lingering producer's flush. */
  @SuppressWarnings("unchecked")
  private static void publishInOneBatch(
      KafkaListenerApplication application,
      String topic,
      List<String> keys,
      List<Integer> partitions)
      throws Exception {
    Map<String, Object> configs =
        new HashMap<>(
            application.context().getBean(ProducerFactory.class).getConfigurationProperties());
    configs.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    try (Producer<String, String> producer = new KafkaProducer<>(configs)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (int i = 0; i < keys.size(); i++) {
        ProducerRecord<String, String> record =
            new ProducerRecord<>(topic, partitions.get(i), null, keys.get(i));
        record.headers().add("Idempotency-Key", keys.get(i).getBytes(StandardCharsets.UTF_8));
        sent.add(producer.send(record));
      }
      producer.flush();
      for (Future<RecordMetadata> each : sent) {
        each.get(30, TimeUnit.SECONDS);
      }
    }
  }

  private static void awaitOrGoOn(String what, Poll.Condition condition)
      throws InterruptedException {
    try {
      Poll.within(Duration.ofSeconds(40)).every(Duration.ofMillis(50)).until(what, condition);
    } catch (AssertionError timedOut) {
      // the assertions say what happened
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class PlacesListeners {
    @Bean
    PlacesListener probeAPlacesListener(SuiteProvider provider) {
      return new PlacesListener(provider);
    }
  }

  /** Sends each record's payload in order; fails once at the record its row names. */
  public static class PlacesListener {
    private final SuiteProvider provider;
    final AtomicInteger calls = new AtomicInteger();
    final AtomicReference<String> firstList = new AtomicReference<>();
    final AtomicReference<String> stopped = new AtomicReference<>();
    final Set<String> failedOnce = ConcurrentHashMap.newKeySet();
    volatile String stopAt = "none";

    PlacesListener(SuiteProvider provider) {
      this.provider = provider;
    }

    // read and set through methods: the bean is a proxy (its own fields are not the listener's)
    void stopAt(String row) {
      stopAt = row;
    }

    int calls() {
      return calls.get();
    }

    String firstList() {
      return firstList.get();
    }

    String stopped() {
      return stopped.get();
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void batch(List<ConsumerRecord<String, String>> records) {
      calls.incrementAndGet();
      int stop = -1;
      if (stopped.get() == null && records.size() == 6) {
        firstList.set(
            records.stream().map(r -> "p" + r.partition() + "@" + r.offset()).toList().toString());
        stop = stopIndex(records);
      }
      for (int i = 0; i < records.size(); i++) {
        ConsumerRecord<String, String> record = records.get(i);
        try {
          if (i == stop && failedOnce.add(record.value())) {
            stopped.set("index " + i + ", p" + record.partition() + "@" + record.offset());
            throw new IllegalStateException("the provider is out for a moment");
          }
          provider.send(record.value());
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        }
      }
    }

    private int stopIndex(List<ConsumerRecord<String, String>> records) {
      switch (stopAt) {
        case "first":
          return 0;
        case "last":
          return records.size() - 1;
        default:
          int firstPartition = records.get(0).partition();
          int seen = 0;
          for (int i = 0; i < records.size(); i++) {
            if (records.get(i).partition() != firstPartition && ++seen == 2) {
              return i;
            }
          }
          return -1;
      }
    }
  }
}
