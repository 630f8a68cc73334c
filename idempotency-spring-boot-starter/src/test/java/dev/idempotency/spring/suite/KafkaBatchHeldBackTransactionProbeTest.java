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
 * <p>Open finding. Found (high, repeated sends) on 04d884e, Boot 3.5 and 4.0: the first delivery
 * failed at message 3 (read first) and held it back; the second sent messages 0, 1 and 2 and
 * stopped before message 3 (the held-back deferral), which rolled the container's transaction back,
 * released their keys, and the next delivery sent them again, and again ("sends of the four: [2, 2,
 * 2, 0]" after three listener calls, growing). Since the held-back hint is not taken in a
 * container's transaction, no message is sent twice, but the state before 04d884e is back (medium,
 * no progress): each delivery fails at the first unread message with the listener's failure, rolls
 * back, and comes again; nothing is sent or dead-lettered ("listener calls: 15, sends of the four:
 * [0, 0, 0, 0], dead-lettered: []", Boot 3.5 and 4.0).
 *
 * <p>Left open by fixkafka2, which found no way to progress here without a second send: in a
 * container transaction any failure of a batch rolls its whole transaction back, the sends before
 * the failed message included (their keys released), and Spring Kafka's after-rollback processor
 * seeks the whole batch back. The container commits the offsets before a failed message only when
 * its error handler returns, having recovered the failed one in the same call (then it sends the
 * whole batch's offsets to the transaction): a held-back message, or a handler's retry of it, rolls
 * back the sends before it. Since b07e968 the first failure comes back as a deferral from message 0
 * (never counted or recovered by the handler, so never dead-lettered or committed unsent), and the
 * batch still comes back without end, without a send (the same facts, Boot 3.5).
 */
@Tag("open-finding")
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
