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
@Tag("open-finding")
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
   * Open finding (probeS, on 5cfa0b8; high: the message before the poison one sent again at every
   * delivery, without end, hundreds of times; the poison one never dead-lettered, the ones after it
   * never sent). Boot 3.5: "sends of message 0 (shapes [keyed, poison, keyed, keyed], sends: [339,
   * 0, 0, 0], dead-lettered: []) expected: 1 but was: 339" when it waited 90 s; now the wait ends
   * at a second send ("sends: [3, 0, 0, 0]" on Boot 3.5, "[4, 0, 0, 0]" on Boot 4.0). The starter
   * runs message 0 and names the poison message (BatchListenerFailedException, index 1); the
   * DefaultErrorHandler recovers it to the dead-letter topic, then throws "Seek to current after
   * exception" for the records after it, which rolls the container's transaction back (the
   * dead-letter record and the offsets too), releases message 0's key, and the after-rollback
   * processor brings the whole batch back. Only a poison message that is last in the batch lets
   * the error handler return. This row runs alone in its application: a loop here stops every
   * later batch of the partition.
   */
  @Test
  void aPoisonMessageInTheMiddleLeavesTheOthersSentOnce() throws Exception {
    KafkaBatchPoisonPlacementProbeTest.check(
        application, provider, "keyed", "poison", "keyed", "keyed");
  }
}
