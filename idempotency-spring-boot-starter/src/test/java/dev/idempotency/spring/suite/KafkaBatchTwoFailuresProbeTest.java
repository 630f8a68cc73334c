package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.spring.suite.KafkaBatchHeldBackNotRetryableProbeTest.FinalRefusalListener;
import dev.idempotency.spring.suite.KafkaBatchHeldBackNotRetryableProbeTest.FinalRefusalListeners;
import dev.idempotency.spring.suite.KafkaBatchHeldBackThenSentProbeTest.OnceFailingListener;
import dev.idempotency.spring.suite.KafkaBatchHeldBackThenSentProbeTest.OnceFailingListeners;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeI, of fixkafka2's held-back deferrals): the backwards readers of the {@code
 * KafkaBatchHeldBack*} probes with more than one failure in a batch. The promise (SPEC 1): every
 * message that does not fail for good is sent exactly once; each that does is dead-lettered once,
 * and only it.
 */
class KafkaBatchTwoFailuresProbeTest {

  /**
   * Messages 1 and 3 of four are refused for good (the handler takes the refusal for not
   * retryable): each is held back in turn, messages 0 and 2 are sent, 1 and 3 dead-lettered.
   *
   * <p>Fails (a second send; the documented limit of a listener that sends out of list order, as
   * KafkaBatchReadsTest's backwards case, not a gap of the held-back deferrals) on 9b71ea4, Boot
   * 3.5 and 4.0: "sends of 2 (listener calls: 6, sends: [1, 0, 2, 0], dead-lettered: [refused-1,
   * refused-3]) expected: 1 but was: 2". With message 3 held back, the listener gets 0 to 2, sends
   * 2, then fails at 1 before reading 0: message 2, read after the named one, is not counted as
   * sent (its key released, as docs/message-consumers.md says), and the next delivery sends it
   * again. Everything else holds: 0 sent once, 1 and 3 dead-lettered once each.
   */
  @Tag("open-finding")
  @Test
  void twoMessagesRefusedForGoodAreDeadLetteredAndTheOthersSent() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-two-failures-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {FinalRefusalListeners.class})) {
      String id = UUID.randomUUID().toString();
      String[] keys = {"two-0-" + id, "refused-1-" + id, "two-2-" + id, "refused-3-" + id};
      application.publishInOneBatch(keys);
      FinalRefusalListener listener = application.context().getBean(FinalRefusalListener.class);
      Waits.await(
          "messages 0 and 2 sent, 1 and 3 dead-lettered",
          () ->
              provider.sends(keys[0]) >= 1
                  && provider.sends(keys[2]) >= 1
                  && application.deadLettered().size() >= 2);
      application.awaitAcknowledged();
      String facts =
          "listener calls: "
              + listener.calls()
              + ", sends: "
              + List.of(keys).stream().map(provider::sends).toList()
              + ", dead-lettered: "
              + application.deadLettered();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(provider.sends(keys[0]))
                .as("sends of 0 (" + facts + ")")
                .isEqualTo(1);
            softly
                .assertThat(provider.sends(keys[2]))
                .as("sends of 2 (" + facts + ")")
                .isEqualTo(1);
            softly
                .assertThat(application.deadLettered())
                .as("dead-lettered (" + facts + ")")
                .containsExactlyInAnyOrder(keys[1], keys[3]);
          });
    }
  }

  /**
   * Message 1 repeats message 0's key (a message repeated in one batch runs once), message 3 fails
   * once: held back, then sent; message 1 is never sent, its key's send being message 0's. Passes
   * on 9b71ea4 (Boot 3.5: 44.3 s, Boot 4.0: 24.5 s, each the first test of its JVM, with the
   * broker's start): extended.
   */
  @Tag("extended")
  @Test
  void aRepeatedKeyAndAHeldBackMessageInOneBatch() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-repeated-held-back-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {OnceFailingListeners.class})) {
      String id = UUID.randomUUID().toString();
      String[] keys = {"rep-0-" + id, "rep-0-" + id, "rep-2-" + id, "flaky-3-" + id};
      String[] payloads = {keys[0], "rep-1-copy-" + id, keys[2], keys[3]};
      application.publishInOneBatch(keys, payloads);
      OnceFailingListener listener = application.context().getBean(OnceFailingListener.class);
      Waits.await(
          "messages 0, 2 and 3 sent",
          () ->
              provider.sends(payloads[0]) >= 1
                  && provider.sends(payloads[2]) >= 1
                  && provider.sends(payloads[3]) >= 1);
      application.awaitAcknowledged();
      String facts =
          "listener calls: "
              + listener.calls()
              + ", sends: "
              + List.of(payloads).stream().map(provider::sends).toList()
              + ", dead-lettered: "
              + application.deadLettered();
      org.assertj.core.api.Assertions.assertThat(
              List.of(payloads).stream().map(provider::sends).toList())
          .as(facts)
          .containsExactly(1, 0, 1, 1);
      org.assertj.core.api.Assertions.assertThat(application.deadLettered()).as(facts).isEmpty();
    }
  }
}
