package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.suite.KafkaBatchPoisonPlacementProbeTest.PlacementListeners;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeS) of fixpoison (b5ba4f1): {@link KafkaBatchPoisonPlacementProbeTest}'s batch
 * listener in a Kafka container transaction ({@code spring.kafka.producer.transaction-id-prefix}),
 * where a failure of the batch may roll back the sends before it (their keys released) and the
 * after-rollback processor may bring the whole batch back. The promise (SPEC 1, 15): each keyed
 * message is sent once, the poison one dead-lettered, never the keyed ones sent again.
 */
@Tag("extended") // CI time: its own application, 15 to 30 s
class KafkaBatchPoisonTransactionProbeTest {

  private static SuiteProvider provider;
  private static KafkaListenerApplication application;

  @BeforeAll
  static void start() {
    provider = new SuiteProvider();
    String topic = "idem.probe-s-batch-poison-tx-" + UUID.randomUUID();
    application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {PlacementListeners.class},
            "spring.kafka.producer.transaction-id-prefix=probe-s-poison-tx-" + UUID.randomUUID(),
            "spring.kafka.consumer.isolation-level=read-committed");
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  /*
   * Was an open finding (probeS, on 5cfa0b8). Was high: the message before the poison one sent
   * again at every delivery, without end ("sends of message 0 (shapes [keyed, poison, keyed,
   * keyed], sends: [339, 0, 0, 0], dead-lettered: []) expected: 1 but was: 339" in 90 s, Boot 3.5;
   * the wait then ended at a second send: "[3, 0, 0, 0]" on Boot 3.5, "[4, 0, 0, 0]" on Boot 4.0).
   * The DefaultErrorHandler recovered the poison message to the dead-letter topic, then threw "Seek
   * to current after exception" for the records after it, which rolled the container's transaction
   * back (the dead-letter record too), released message 0's key, and the after-rollback processor
   * brought the whole batch back. fixkafkatx made the batch come back whole as a deferral before
   * anything was claimed (medium: the partition stalled, "sends: [0, 0, 0, 0], dead-lettered:
   * []"). Since kafkatx the starter's error handler takes that throw as the handler's answer in a
   * Kafka transaction, which commits the records before the stop and the dead letter
   * (KafkaTransactionBatchStops): passes on Boot 3.5 and 4.0.
   */
  @Test
  void aPoisonMessageInTheMiddleLeavesTheOthersSentOnce() throws Exception {
    KafkaBatchPoisonPlacementProbeTest.check(
        application, provider, "keyed", "poison", "keyed", "keyed");
  }
}
