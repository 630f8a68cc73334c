package dev.idempotency.spring.messaging;

import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * A real Kafka broker in this JVM (KRaft, spring-kafka-test's), started once on first use with the
 * messaging tests' topics, able to run transactions, and stopped when the JVM exits.
 */
public final class EmbeddedKafka {

  /** The topics: each listener's, and its dead-letter or output topic. */
  public static final String[] TOPICS = {
    "idem.record", "idem.record.DLT",
    "idem.dead-letter", "idem.dead-letter.DLT",
    "idem.header", "idem.header.DLT",
    "idem.keyed", "idem.keyed.DLT",
    "idem.batch", "idem.batch.DLT",
    "idem.filtered", "idem.filtered.DLT",
    "idem.record-list", "idem.record-list.DLT",
    "idem.converted-key", "idem.converted-key.DLT",
    "idem.crash", "idem.example",
    "idem.tx", "idem.tx.out",
    "idem.tx-batch", "idem.tx-batch.DLT"
  };

  private static EmbeddedKafkaKraftBroker broker;

  private EmbeddedKafka() {}

  /** The bootstrap servers of the shared broker, started if needed. */
  public static synchronized String bootstrapServers() {
    if (broker == null) {
      EmbeddedKafkaKraftBroker started = new EmbeddedKafkaKraftBroker(1, 1, TOPICS);
      // one broker: transactions need their state topic with one replica; and the two internal
      // topics with one partition each, not Kafka's 50, which the broker creates at the first
      // group join and the first transactional producer, and on a busy machine that took seconds
      // in the first Kafka test of each test JVM
      started.brokerProperties(
          java.util.Map.of(
              "transaction.state.log.replication.factor", "1",
              "transaction.state.log.min.isr", "1",
              "transaction.state.log.num.partitions", "1",
              "offsets.topic.num.partitions", "1"));
      started.afterPropertiesSet();
      broker = started;
      Runtime.getRuntime().addShutdownHook(new Thread(started::destroy));
    }
    return broker.getBrokersAsString();
  }

  /**
   * Adds the shared broker's address and the messaging tests' properties ({@link
   * ListenerTestConfiguration#PROPERTIES}) to a Kafka test's {@code @DynamicPropertySource}.
   */
  public static void addProperties(DynamicPropertyRegistry registry) {
    registry.add("spring.kafka.bootstrap-servers", EmbeddedKafka::bootstrapServers);
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }
}
