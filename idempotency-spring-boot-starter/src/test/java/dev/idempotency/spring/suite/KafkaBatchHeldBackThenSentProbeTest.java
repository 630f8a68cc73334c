package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probeD, of commit 04d884e's held-back message): a backwards reader whose message 3 fails
 * once (a passing provider outage), then succeeds. The promise (SPEC 1): the held-back message is
 * sent once when it runs alone, and every message of the batch is sent exactly once, none
 * dead-lettered.
 */
class KafkaBatchHeldBackThenSentProbeTest {

  static final String LISTENER = "probe-kafka-batch-held-back-then-sent";

  @Test
  void aHeldBackMessageThatThenSucceedsIsSentOnceWithTheOthers() throws Exception {
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-held-back-sent",
            3,
            "flaky-",
            OnceFailingListeners.class,
            OnceFailingListener.class,
            OnceFailingListener::calls)) {
      Waits.await("each message sent", () -> batch.sends().stream().allMatch(sends -> sends >= 1));
      batch.application.awaitAcknowledged();
      String facts = batch.facts();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            for (String key : batch.keys) {
              softly
                  .assertThat(batch.provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isEqualTo(1);
            }
            softly.assertThat(batch.application.deadLettered()).as("dead-lettered").isEmpty();
          });
    }
  }

  /** The probe's listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class OnceFailingListeners {
    @Bean
    OnceFailingListener onceFailingListener(SuiteProvider provider) {
      return new OnceFailingListener(provider);
    }
  }

  /** Sends its list from the last message to the first; a payload "flaky-..." fails once. */
  public static class OnceFailingListener {
    private final SuiteProvider provider;
    private final AtomicInteger calls = new AtomicInteger();
    private final Set<String> failed = ConcurrentHashMap.newKeySet();

    OnceFailingListener(SuiteProvider provider) {
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
        if (payload.startsWith("flaky-") && failed.add(payload)) {
          throw new BatchDeliveryFailedException(
              i, new IllegalStateException("the provider is out for a moment"));
        }
        provider.send(payload);
      }
    }
  }
}
