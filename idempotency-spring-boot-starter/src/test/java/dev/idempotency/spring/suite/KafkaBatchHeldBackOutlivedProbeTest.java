package dev.idempotency.spring.suite;

import dev.idempotency.spring.suite.KafkaBatchBackwardsPermanentFailureProbeTest.BackwardsListener;
import dev.idempotency.spring.suite.KafkaBatchBackwardsPermanentFailureProbeTest.BackwardsListeners;
import java.util.Arrays;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * Probe (fixkafka2, of the held-back hint of commit 04d884e): the hint is never forgotten for a
 * message that is dead-lettered, only for one that is sent. The backwards reader of {@link
 * KafkaBatchBackwardsPermanentFailureProbeTest} has its message 3 refused for good and
 * dead-lettered (the suite's handler: three tries, then the {@code .DLT} topic); then the same key
 * comes again, in a new message (the dead letter republished once the provider was mended: its
 * payload now sent), between two others in one batch. The promise: the new message is a message
 * like any other, sent in that batch's one delivery with the others; the hint of a message that is
 * gone must not defer it (each deferral costs the messaging backoff, and the message after it waits
 * too).
 *
 * <p>Found (low: a delay, nothing lost or sent twice) on b07e968 (the hint as 04d884e keeps it, by
 * listener and key), Boot 3.5: the new message was held back (the listener got the message before
 * it, then it alone, then the message after it): "listener calls for the new batch ... expected: 1
 * but was: 3". Fixed: the hint names the record (topic, partition, offset) it was taken for.
 */
class KafkaBatchHeldBackOutlivedProbeTest {

  @Test
  void aHeldBackMessageThatWasDeadLetteredDoesNotHoldBackALaterMessageOfItsKey() throws Exception {
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-held-back-outlived",
            3,
            "refused-",
            BackwardsListeners.class,
            BackwardsListener.class,
            BackwardsListener::calls)) {
      String[] keys = batch.keys;
      Waits.await(
          "the others sent and message 3 dead-lettered",
          () ->
              Arrays.stream(keys).limit(3).allMatch(key -> batch.provider.sends(key) >= 1)
                  && batch.application.deadLettered().contains(keys[3]));
      batch.application.awaitAcknowledged();
      int callsBefore = batch.calls();

      String[] again = {"before-" + UUID.randomUUID(), keys[3], "after-" + UUID.randomUUID()};
      String[] payloads = {again[0], "mended-" + UUID.randomUUID(), again[2]};
      batch.application.publishInOneBatch(again, payloads);
      Waits.await(
          "the three sent",
          () -> Arrays.stream(payloads).allMatch(payload -> batch.provider.sends(payload) >= 1));
      batch.application.awaitAcknowledged();
      String facts =
          batch.facts()
              + ", sends of the new three: "
              + Arrays.stream(payloads).map(batch.provider::sends).toList();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(batch.calls() - callsBefore)
                .as("listener calls for the new batch (" + facts + ")")
                .isEqualTo(1);
            for (String payload : payloads) {
              softly
                  .assertThat(batch.provider.sends(payload))
                  .as("sends of " + payload + " (" + facts + ")")
                  .isEqualTo(1);
            }
          });
    }
  }
}
