package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The run's broker restarts on the same address and data, so clients find it again. */
class KafkaOrdersTest {

  @Test
  void aRestartedBrokerKeepsItsAddressAndItsRecords() throws Exception {
    try (KafkaOrders kafka = new KafkaOrders()) {
      String before = kafka.bootstrapServers();
      kafka.publish("before-restart");

      kafka.restartBroker(Duration.ofMillis(500));
      kafka.publish("after-restart");

      assertThat(kafka.bootstrapServers()).isEqualTo(before);
      assertThat(kafka.latestOffset()).isEqualTo(2);
      assertThat(kafka.publishedKeys()).containsExactly("before-restart", "after-restart");
    }
  }
}
