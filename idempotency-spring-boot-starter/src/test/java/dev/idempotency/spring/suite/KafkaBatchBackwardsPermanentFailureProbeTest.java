package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probe42l, of branch fix41a's batch failure rule): a Kafka batch {@code IdempotentListener}
 * reads its list from the last message to the first (the case fix41a's docs name) and one message's
 * send fails every time (the provider refuses it for good); the listener names it, {@code
 * BatchDeliveryFailedException(i, cause)}. The application's error handler (the suite's: three
 * tries, then the {@code .DLT} topic) decides the fate of a failed message
 * (docs/message-consumers.md: "the broker's retry and dead-letter policy, unchanged"). The promise
 * (SPEC 1, 15): every other message is sent (none lost), none an unbounded number of times, and the
 * refused one is dead-lettered after the handler's tries.
 *
 * <p>Failed before fixkafka: the batch failed from message 0 (never read, so never sent), and the
 * handler's tries counted against it: message 0 (and, for {@code refused} 1, no other) was
 * dead-lettered without a send, then the refused one after its own tries. Now the next delivery
 * holds the refused message back: the listener gets the messages before it, then it alone.
 */
class KafkaBatchBackwardsPermanentFailureProbeTest {

  static final String LISTENER = "probe-kafka-batch-backwards-refused";

  /**
   * Four messages, the one at {@code refused} (3: the listener's first read; 1: after it sent
   * messages 3 and 2) refused for good. Waits until it is dead-lettered and the others sent, or the
   * listener ran ten times (the handler's three tries are long past); then the refused message must
   * be dead-lettered, each other message sent, and none more often than the handler's tries allow
   * (the documented out-of-order resend, bounded).
   */
  @ParameterizedTest
  @ValueSource(ints = {3, 1})
  void aBackwardsReaderWithAMessageRefusedForGoodSendsTheOthersAndDeadLettersIt(int refused)
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-backwards-refused-" + UUID.randomUUID();
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
        keys[i] = (i == refused ? "refused-" : "probe-backwards-") + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      List<String> others = new java.util.ArrayList<>(Arrays.asList(keys));
      others.remove(refused);
      try {
        Waits.await(
            "the others sent and the refused message dead-lettered, or ten listener calls",
            () ->
                listener.calls() >= 10
                    || (others.stream().allMatch(key -> provider.sends(key) >= 1)
                        && application.deadLettered().contains(keys[refused])));
      } catch (AssertionError timedOut) {
        // neither: the assertions below say what happened
      }
      String facts =
          "listener calls: "
              + listener.calls()
              + ", sends of the four: "
              + Arrays.stream(keys).map(provider::sends).toList();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(application.deadLettered())
                .as("dead-lettered (" + facts + ")")
                .containsExactly(keys[refused]);
            for (String key : others) {
              softly
                  .assertThat(provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isBetween(1, 4);
            }
          });
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class BackwardsListeners {
    @Bean
    BackwardsListener backwardsListener(SuiteProvider provider) {
      return new BackwardsListener(provider);
    }
  }

  /** Sends its list from the last message to the first; a payload "refused-..." always fails. */
  public static class BackwardsListener {
    private final SuiteProvider provider;
    private final AtomicInteger calls = new AtomicInteger();

    BackwardsListener(SuiteProvider provider) {
      this.provider = provider;
    }

    /** How often the listener ran. */
    public int calls() {
      return calls.get();
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = LISTENER)
    public void batch(List<String> payloads) {
      calls.incrementAndGet();
      for (int i = payloads.size() - 1; i >= 0; i--) {
        String payload = payloads.get(i);
        if (payload.startsWith("refused-")) {
          throw new BatchDeliveryFailedException(
              i, new IllegalStateException("the provider refused the message for good"));
        }
        provider.send(payload);
      }
    }
  }
}
