package dev.idempotency.spring.suite;

import dev.idempotency.spring.suite.KafkaBatchBackwardsPermanentFailureProbeTest.BackwardsListener;
import dev.idempotency.spring.suite.KafkaBatchBackwardsPermanentFailureProbeTest.BackwardsListeners;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeD, of commit 04d884e's held-back message): probe42l's backwards reader ({@link
 * KafkaBatchBackwardsPermanentFailureProbeTest}, message 3 refused for good) in a Kafka container
 * transaction ({@code spring.kafka.producer.transaction-id-prefix}): a failure, and so the
 * held-back deferral, rolls the whole delivery back. The promise (SPEC 1): messages 0, 1 and 2 are
 * each sent once, and the deliveries end (no hot loop re-sending them).
 *
 * <p>Was an open finding. Found (high, repeated sends) on 04d884e, Boot 3.5 and 4.0: the first
 * delivery failed at message 3 (read first) and held it back; the second sent messages 0, 1 and 2
 * and stopped before message 3 (the held-back deferral), which rolled the container's transaction
 * back, released their keys, and the next delivery sent them again, and again ("sends of the four:
 * [2, 2, 2, 0]" after three listener calls, growing). Then the held-back hint was not taken in a
 * container's transaction: no message was sent twice, but nothing progressed (medium): each
 * delivery failed at the first unread message with the listener's failure, rolled back, and came
 * again; nothing was sent or dead-lettered ("listener calls: 15, sends of the four: [0, 0, 0, 0],
 * dead-lettered: []", Boot 3.5 and 4.0; the same since b07e968).
 *
 * <p>Since kafkatx a stop partway through a batch in a Kafka container transaction commits the
 * messages before it (KafkaTransactionBatchStops), so the held-back hint is taken there again:
 * passes on Boot 3.5 and 4.0 (each of messages 0, 1 and 2 sent once). It runs to its 90 s wait when
 * it passes (fewer than fifteen listener calls, no second send).
 */
@Tag("extended") // CI time: its own application and a 90 s wait
class KafkaBatchHeldBackTransactionProbeTest {

  @Test
  void aBackwardsReaderInAKafkaTransactionSendsTheOthersOnce() throws Exception {
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-held-back-tx",
            3,
            "refused-",
            BackwardsListeners.class,
            BackwardsListener.class,
            BackwardsListener::calls,
            "spring.kafka.producer.transaction-id-prefix=probe-held-back-tx-" + UUID.randomUUID(),
            "spring.kafka.consumer.isolation-level=read-committed")) {
      batch.awaitOrGoOn(
          "fifteen listener calls, or a message sent twice",
          () -> batch.calls() >= 15 || batch.sends().stream().anyMatch(sends -> sends >= 2));
      String facts = batch.facts();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            for (int i = 0; i < 3; i++) {
              softly
                  .assertThat(batch.provider.sends(batch.keys[i]))
                  .as("sends of message " + i + " (" + facts + ")")
                  .isEqualTo(1);
            }
          });
    }
  }
}
