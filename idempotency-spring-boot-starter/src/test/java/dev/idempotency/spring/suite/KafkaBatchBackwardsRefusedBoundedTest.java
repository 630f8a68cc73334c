package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.suite.KafkaBatchBackwardsPermanentFailureProbeTest.BackwardsListener;
import dev.idempotency.spring.suite.KafkaBatchBackwardsPermanentFailureProbeTest.BackwardsListeners;
import java.util.Arrays;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * A Kafka batch {@code @IdempotentListener} that reads its list from the last message to the first
 * and names a message the provider refuses for good, after it sent the two messages behind it
 * (probe42l's {@link KafkaBatchBackwardsPermanentFailureProbeTest}, refused message 1): the batch
 * fails from the first message the listener did not read (message 0, never committed unsent), with
 * the listener's own failure, so the application's error handler (the suite's: three tries, then
 * the {@code .DLT} topic) bounds it. Before (a deferral of message 0 with no limit), the batch came
 * back without end, the refused message was never dead-lettered, and messages 2 and 3, read after
 * the named index, were released and sent again at every loop (10 sends each in 10 calls). The
 * out-of-order resend itself is documented (name the first message not sent); what this test holds
 * is that it ends.
 */
class KafkaBatchBackwardsRefusedBoundedTest {

  @Test
  void aBackwardsReaderWhoseMiddleMessageIsRefusedForGoodEndsWithinTheHandlersTries()
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.backwards-refused-bounded-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {BackwardsListeners.class})) {
      BackwardsListener listener = application.context().getBean(BackwardsListener.class);
      String[] keys = new String[4];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = (i == 1 ? "refused-" : "bounded-backwards-") + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      Waits.await(
          "the refused message dead-lettered and messages 2 and 3 recorded",
          () ->
              application.deadLettered().contains(keys[1])
                  && provider.sends(keys[2]) >= 1
                  && provider.sends(keys[3]) >= 1);
      int callsAtTheEnd = listener.calls();
      String facts =
          "listener calls: "
              + callsAtTheEnd
              + ", sends of the four: "
              + Arrays.stream(keys).map(provider::sends).toList()
              + ", dead-lettered: "
              + application.deadLettered();
      // two failing deliveries of three tries each (from message 0, then from message 1), and one
      // that succeeds: at most 7 sends of messages 2 and 3, never without bound
      assertThat(provider.sends(keys[2])).as(facts).isBetween(1, 7);
      assertThat(provider.sends(keys[3])).as(facts).isBetween(1, 7);
      assertThat(provider.sends(keys[1])).as(facts).isZero();
      assertThat(callsAtTheEnd).as(facts).isLessThanOrEqualTo(7);
    }
  }
}
