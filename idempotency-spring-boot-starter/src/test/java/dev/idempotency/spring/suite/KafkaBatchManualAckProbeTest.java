package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.support.Acknowledgment;

/**
 * Probe (probeI, of fixkafka2's held-back deferrals): Kafka batch listeners with manual
 * acknowledgement ({@code spring.kafka.listener.ack-mode=manual} or {@code manual_immediate}),
 * which the starter supports (a replay acknowledges the listener's {@code Acknowledgment}). The
 * promise (SPEC 1): every message of the batch is sent exactly once, none committed or
 * dead-lettered unsent.
 */
class KafkaBatchManualAckProbeTest {

  static final String NACK_LISTENER = "probe-kafka-batch-nack";
  static final String ACK_LISTENER = "probe-kafka-batch-manual-held-back";

  /**
   * Spring Kafka's own way for a manually acknowledging batch listener to say "from here on,
   * again": {@code acknowledgment.nack(index, sleep)} and return (the records before the index are
   * committed, the rest are polled again). Message 2's send fails once; the listener nacks it.
   *
   * <p>Found (high, a lost send) on 44d14d3, Boot 3.5: the listener returned normally, so the
   * starter recorded every message it read as sent, message 2 included; its redelivery was a
   * replay: "sends of flaky-2-... (listener calls: 2, sends of the four: [1, 1, 0, 1],
   * dead-lettered: []) expected: 1 but was: 0".
   */
  @Test
  void aBatchListenerThatNacksAFailedSendSendsItLater() throws Exception {
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-nack",
            2,
            "flaky-",
            NackListeners.class,
            NackListener.class,
            NackListener::calls,
            "spring.kafka.listener.ack-mode=manual")) {
      batch.awaitOrGoOn(
          "each message sent", () -> batch.sends().stream().allMatch(sends -> sends >= 1));
      String facts = batch.facts();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            for (String key : batch.keys) {
              softly
                  .assertThat(batch.provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isEqualTo(1);
            }
          });
    }
  }

  /**
   * The backwards reader of {@link KafkaBatchHeldBackThenSentProbeTest} (message 3 fails once at
   * its first read, before messages 0 to 2 are read), acknowledging manually once it went through
   * its list. At the next delivery the starter holds message 3 back: the listener gets messages 0
   * to 2, sends them and acknowledges its batch, and message 3 comes back as a deferral after the
   * messaging backoff (here 5 s). The application stops within that pause; a new one of the same
   * group takes the topic over.
   *
   * <p>Found (medium, a lost send: committed unsent, lost at a restart or rebalance within the
   * deferral's backoff) on 44d14d3, Boot 3.5, {@code manual}: the listener acknowledged the list it
   * got (messages 0 to 2), which Spring Kafka takes for the whole polled batch, message 3 included;
   * the starter's deferral of message 3 seeks it back in this consumer only, and the queued
   * acknowledgement commits past it: "sends of flaky-3-... (sends of message 3 at the stop: 0,
   * listener calls: 2, sends of the four: [1, 1, 1, 0]) expected: 1 but was: 0". ({@code
   * manual_immediate} passed.)
   */
  @ParameterizedTest
  @ValueSource(strings = {"manual", "manual_immediate"})
  void aHeldBackMessageOfAManuallyAcknowledgingListenerIsSentAfterARestart(String ackMode)
      throws Exception {
    String[] keys;
    SuiteProvider provider;
    SwitchableKeyStore store;
    String topic;
    String committedAtStop;
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-manual-held-back",
            3,
            "flaky-",
            ManualAckListeners.class,
            ManualAckListener.class,
            ManualAckListener::calls,
            "spring.kafka.listener.ack-mode=" + ackMode,
            "idempotency.messaging.back-off.initial=5s",
            "idempotency.messaging.back-off.max=5s")) {
      keys = batch.keys;
      provider = batch.provider;
      store = batch.store;
      topic = batch.application.context().getEnvironment().getProperty("suite.kafka.topic");
      Waits.await(
          "messages 0 to 2 sent",
          () ->
              provider.sends(keys[0]) >= 1
                  && provider.sends(keys[1]) >= 1
                  && provider.sends(keys[2]) >= 1);
      committedAtStop =
          "sends of message 3 at the stop: "
              + provider.sends(keys[3])
              + ", listener calls: "
              + batch.calls();
    }
    // the same group takes the topic over; message 3 no longer fails
    try (KafkaListenerApplication next =
        KafkaListenerApplication.start(
            store,
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {ManualAckListeners.class},
            "spring.kafka.listener.ack-mode=" + ackMode,
            "probe.kafka.flaky=false")) {
      try {
        Waits.await("message 3 sent", () -> provider.sends(keys[3]) >= 1);
      } catch (AssertionError timedOut) {
        // the assertions say what happened
      }
      String facts =
          committedAtStop
              + ", sends of the four: "
              + java.util.Arrays.stream(keys).map(provider::sends).toList();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            for (String key : keys) {
              softly
                  .assertThat(provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isEqualTo(1);
            }
          });
    }
  }

  /** The nacking listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class NackListeners {
    @Bean
    NackListener nackListener(SuiteProvider provider) {
      return new NackListener(provider);
    }
  }

  /**
   * Sends its list in order; a payload "flaky-..." fails once, and the listener nacks from it, as
   * Spring Kafka's reference shows, then returns.
   */
  public static class NackListener {
    private final SuiteProvider provider;
    private final AtomicInteger calls = new AtomicInteger();
    private final Set<String> failed = ConcurrentHashMap.newKeySet();

    NackListener(SuiteProvider provider) {
      this.provider = provider;
    }

    /** How often the listener ran. */
    public int calls() {
      return calls.get();
    }

    @KafkaListener(
        id = NACK_LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = NACK_LISTENER)
    public void batch(List<String> payloads, Acknowledgment acknowledgment) {
      calls.incrementAndGet();
      for (int i = 0; i < payloads.size(); i++) {
        String payload = payloads.get(i);
        try {
          if (payload.startsWith("flaky-") && failed.add(payload)) {
            throw new IllegalStateException("the provider is out for a moment");
          }
          provider.send(payload);
        } catch (IllegalStateException outage) {
          acknowledgment.nack(i, Duration.ofMillis(100));
          return;
        }
      }
      acknowledgment.acknowledge();
    }
  }

  /** The manually acknowledging backwards reader, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class ManualAckListeners {
    @Bean
    ManualAckListener manualAckListener(
        SuiteProvider provider, @Value("${probe.kafka.flaky:true}") boolean flaky) {
      return new ManualAckListener(provider, flaky);
    }
  }

  /**
   * Sends its list from the last message to the first, then acknowledges; a payload "flaky-..."
   * fails once (unless {@code flaky} is false).
   */
  public static class ManualAckListener {
    private final SuiteProvider provider;
    private final boolean flaky;
    private final AtomicInteger calls = new AtomicInteger();
    private final Set<String> failed = ConcurrentHashMap.newKeySet();

    ManualAckListener(SuiteProvider provider, boolean flaky) {
      this.provider = provider;
      this.flaky = flaky;
    }

    /** How often the listener ran. */
    public int calls() {
      return calls.get();
    }

    @KafkaListener(
        id = ACK_LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "true")
    @IdempotentListener(name = ACK_LISTENER)
    public void batch(List<String> payloads, Acknowledgment acknowledgment) {
      calls.incrementAndGet();
      for (int i = payloads.size() - 1; i >= 0; i--) {
        String payload = payloads.get(i);
        if (flaky && payload.startsWith("flaky-") && failed.add(payload)) {
          throw new BatchDeliveryFailedException(
              i, new IllegalStateException("the provider is out for a moment"));
        }
        provider.send(payload);
      }
      acknowledgment.acknowledge();
    }
  }
}
