package dev.idempotency.reliability;

import dev.idempotency.reliability.app.OrderListener;
import dev.idempotency.testservers.FreePorts;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.TimeUnit;
import kafka.server.BrokerServer;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;

/**
 * The run's Kafka side: a real broker in this JVM (KRaft, spring-kafka-test's), a producer that
 * publishes a new key to {@link OrderListener#TOPIC} every {@code everyMillis} (the key in the
 * {@code Idempotency-Key} header and as the value), and, afterwards, which keys the broker
 * considers consumed: those below the listener group's committed offset. The broker listens on a
 * fixed port, so that it can be {@linkplain #restartBroker restarted} on the same address and data.
 */
final class KafkaOrders implements AutoCloseable {

  private static final TopicPartition PARTITION = new TopicPartition(OrderListener.TOPIC, 0);

  private final EmbeddedKafkaKraftBroker broker;
  private final KafkaProducer<String, String> producer;
  private final ConcurrentSkipListMap<Long, String> keysByOffset = new ConcurrentSkipListMap<>();

  KafkaOrders() {
    broker = new EmbeddedKafkaKraftBroker(1, 1, OrderListener.TOPIC);
    // a fixed port (kafkaPorts is not applied to a KRaft broker here), kept across a restart
    broker.brokerProperty(
        "listeners", "EXTERNAL://localhost:" + FreePorts.next() + ",CONTROLLER://localhost:0");
    broker.afterPropertiesSet();
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    producer = new KafkaProducer<>(props);
  }

  String bootstrapServers() {
    return broker.getBrokersAsString();
  }

  /** The application's arguments for its listener. */
  List<String> appArgs() {
    return List.of(
        "--e2e.kafka.enabled=true",
        "--spring.kafka.bootstrap-servers=" + bootstrapServers(),
        "--spring.kafka.consumer.auto-offset-reset=earliest",
        // a commit after every record: what the broker counts as consumed is what was handled
        "--spring.kafka.listener.ack-mode=RECORD",
        "--spring.kafka.consumer.max-poll-records=10",
        // a killed consumer's partition moves to the next instance in seconds, not 45
        "--spring.kafka.consumer.properties.session.timeout.ms=6000",
        "--spring.kafka.consumer.properties.heartbeat.interval.ms=1000");
  }

  /** Publishes one key and waits (bounded) for the broker's acknowledgement. */
  void publish(String key) throws Exception {
    ProducerRecord<String, String> record = new ProducerRecord<>(OrderListener.TOPIC, 0, key, key);
    record.headers().add("Idempotency-Key", key.getBytes(StandardCharsets.UTF_8));
    long offset = producer.send(record).get(30, TimeUnit.SECONDS).offset();
    keysByOffset.put(offset, key);
  }

  /** Every key published, in offset order. */
  List<String> publishedKeys() {
    return new ArrayList<>(keysByOffset.values());
  }

  /** The topic's end offset, as the broker reports it. */
  long latestOffset() throws Exception {
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers()))) {
      return admin
          .listOffsets(Map.of(PARTITION, OffsetSpec.latest()))
          .all()
          .get(30, TimeUnit.SECONDS)
          .get(PARTITION)
          .offset();
    }
  }

  /**
   * Waits (bounded) until the listener's group has committed every record published, then returns
   * the keys below its committed offset: what the broker considers consumed.
   */
  List<String> awaitConsumed(Duration bound) throws Exception {
    long end = keysByOffset.isEmpty() ? 0 : keysByOffset.lastKey() + 1;
    long committed = 0;
    long deadline = System.nanoTime() + bound.toNanos();
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers()))) {
      end = Math.max(end, latestOffset());
      while (System.nanoTime() < deadline) {
        OffsetAndMetadata offset =
            admin
                .listConsumerGroupOffsets(OrderListener.ID)
                .partitionsToOffsetAndMetadata()
                .get(30, TimeUnit.SECONDS)
                .get(PARTITION);
        committed = offset == null ? 0 : offset.offset();
        if (committed >= end) {
          break;
        }
        TimeUnit.MILLISECONDS.sleep(200); // poll interval of a bounded poll
      }
    }
    List<String> consumed = new ArrayList<>();
    for (Map.Entry<Long, String> entry : keysByOffset.entrySet()) {
      if (entry.getKey() < committed) {
        consumed.add(entry.getValue());
      }
    }
    return consumed;
  }

  /**
   * Stops the broker (the KRaft controller beside it stays up), keeps it down for {@code down}, and
   * starts it again on the same port and log directory; returns once it serves again.
   */
  void restartBroker(Duration down) throws Exception {
    for (BrokerServer server : broker.getCluster().brokers().values()) {
      server.shutdown();
      server.awaitShutdown();
    }
    // the outage's length, not a wait for something
    TimeUnit.MILLISECONDS.sleep(down.toMillis());
    for (BrokerServer server : broker.getCluster().brokers().values()) {
      server.startup();
    }
    broker.getCluster().waitForReadyBrokers();
  }

  @Override
  public void close() {
    producer.close(Duration.ofSeconds(5));
    broker.destroy();
  }
}
