package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.nio.charset.StandardCharsets;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * Issue 37 re-probe (probe37e): the suite's Kafka record and batch listeners in a Kafka container
 * transaction ({@code spring.kafka.producer.transaction-id-prefix}), whose provider call leaves the
 * consumer thread interrupted, after a send that succeeded or one that failed. The promise (SPEC 1,
 * 15, 16): the message is sent once, its outcome recorded after the commit, the consumer goes on,
 * and a republished message is a replay.
 */
class KafkaTransactionInterruptProbeTest {

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void anInterruptedSuccessfulSendInAKafkaTransactionIsRecordedOnce(boolean batch)
      throws Exception {
    assertSentOnce(batch, false);
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void anInterruptedFailedSendInAKafkaTransactionIsRedeliveredAndSentOnce(boolean batch)
      throws Exception {
    assertSentOnce(batch, true);
  }

  /** Publishes {@code key} (its own payload) in a producer transaction of the application's. */
  @SuppressWarnings("unchecked")
  private static void publish(KafkaListenerApplication application, String key) throws Exception {
    KafkaTemplate<String, String> template = application.context().getBean(KafkaTemplate.class);
    String topic = application.context().getEnvironment().getProperty("suite.kafka.topic");
    ProducerRecord<String, String> record = new ProducerRecord<>(topic, key);
    record.headers().add("Idempotency-Key", key.getBytes(StandardCharsets.UTF_8));
    template.executeInTransaction(t -> t.send(record)).get(30, TimeUnit.SECONDS);
  }

  private static void assertSentOnce(boolean batch, boolean failFirst) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String operation =
        batch ? SuiteKafkaApplication.BATCH_LISTENER : SuiteKafkaApplication.LISTENER;
    String key = Waits.newKey("probe-tx-" + batch);
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem.probe-tx-" + UUID.randomUUID(),
            String.valueOf(batch),
            new Class<?>[0],
            "spring.kafka.producer.transaction-id-prefix=probe-tx-" + UUID.randomUUID() + "-",
            "spring.kafka.consumer.isolation-level=read-committed")) {
      if (failFirst) {
        provider.interruptAndFailNextSend();
      } else {
        provider.interruptSenders(true);
      }
      publish(application, key);
      Waits.await("the send", () -> provider.sends(key) >= 1);
      provider.interruptSenders(false);
      Waits.await(
          "the outcome recorded",
          () -> application.events().count(Type.COMPLETED, operation, key) == 1);
      String next = Waits.newKey("probe-tx-next");
      publish(application, next);
      Waits.await(
          "the next message's send (the consumer goes on)", () -> provider.sends(next) == 1);

      publish(application, key);
      Waits.await(
          "the replay", () -> application.events().count(Type.REPLAYED, operation, key) >= 1);
      // (not awaitAcknowledged: a transaction's commit marker takes an offset of its own)
      assertThat(provider.sends(key)).as("one provider send").isEqualTo(1);
      assertThat(application.deadLettered()).isEmpty();
      assertThat(application.consumerFailures())
          .as("the consumer's own failures after the interrupted delivery")
          .isEmpty();
    }
  }
}
