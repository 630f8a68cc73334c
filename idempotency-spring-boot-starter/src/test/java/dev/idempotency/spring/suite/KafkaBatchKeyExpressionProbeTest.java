package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probeN): a Kafka batch listener keyed by an expression over its payload, {@code
 * #payload.split('\|')[1]}, that fails for one message of the batch (a payload without {@code |}:
 * SpEL's index out of bounds). The promise (SPEC 1, 15): that message cannot be keyed, so it is a
 * poison message (recovered at once: the application's dead-letter topic), and each of the others
 * is sent once, none dead-lettered unsent.
 */
class KafkaBatchKeyExpressionProbeTest {

  static final String LISTENER = "probe-kafka-batch-key-expression";

  /*
   * Was an open finding, fixed by fixpoison (a key expression that fails for a message makes it a
   * poison message, an InvalidIdempotencyKeyException, whose index the batch names). It read:
   * (probeN, on feb9e77; high, lost sends: messages with a usable key dead-lettered
   * unsent, skipped unsent under Spring Kafka's default handler). Fails on Boot 3.5 and 4.0 alike:
   * ListenerMethod.elementKey lets SpEL's evaluation failure (EL1025E, index out of bounds) out as
   * it is, not as an InvalidIdempotencyKeyException, so ListenerBatches does not stop the batch at
   * the poison message (which would name its index): the plain failure names no message, the
   * application's handler (3 tries, then the dead-letter topic) retries the whole batch and
   * dead-letters all four: "sends of message 0 (listener calls: 1, sends of the four: [0, 0, 0,
   * 0], dead-lettered: [order|0-..., order|1-..., no-bar-2-..., order|3-...]) expected: 1 but was:
   * 0". Listener calls 1: the marker, after the batch; the batch itself never reached it.
   */
  @Test
  void aKeyExpressionThatFailsForOneMessageLeavesTheOthersSent() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-batch-key-expression-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {ExpressionListeners.class})) {
      ExpressionListener listener = application.context().getBean(ExpressionListener.class);
      String[] payloads = new String[4];
      for (int i = 0; i < payloads.length; i++) {
        payloads[i] = (i == 2 ? "no-bar-" : "order|") + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(payloads, payloads);
      try {
        Waits.await(
            "the three keyed messages sent, or anything dead-lettered",
            () ->
                (provider.sends(payloads[0]) >= 1
                        && provider.sends(payloads[1]) >= 1
                        && provider.sends(payloads[3]) >= 1)
                    || !application.deadLettered().isEmpty());
      } catch (AssertionError timedOut) {
        // the assertions say what happened
      }
      // a redelivery of any of the four comes before a marker published behind them
      String marker = "order|marker-" + UUID.randomUUID();
      application.publishInOneBatch(marker);
      try {
        Waits.await("the marker sent", () -> provider.sends(marker) >= 1);
      } catch (AssertionError timedOut) {
        // the assertions say what happened
      }
      List<String> deadLettered = application.deadLettered();
      String facts =
          "listener calls: "
              + listener.calls()
              + ", sends of the four: "
              + java.util.Arrays.stream(payloads).map(provider::sends).toList()
              + ", dead-lettered: "
              + deadLettered;
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            for (int i : new int[] {0, 1, 3}) {
              softly
                  .assertThat(provider.sends(payloads[i]))
                  .as("sends of message " + i + " (" + facts + ")")
                  .isEqualTo(1);
            }
            softly.assertThat(provider.sends(payloads[2])).as("sends of message 2").isZero();
            softly
                .assertThat(deadLettered)
                .as("dead-lettered (" + facts + ")")
                .containsExactly(payloads[2]);
          });
    }
  }

  /** The listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class ExpressionListeners {
    @Bean
    ExpressionListener expressionListener(SuiteProvider provider) {
      return new ExpressionListener(provider);
    }
  }

  /** Sends each payload of its list, in order, naming a failed send. */
  public static class ExpressionListener {
    private final SuiteProvider provider;
    private final AtomicInteger calls = new AtomicInteger();

    ExpressionListener(SuiteProvider provider) {
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
    @IdempotentListener(name = LISTENER, key = "#payload.split('\\|')[1]")
    public void batch(List<String> payloads) {
      calls.incrementAndGet();
      for (int i = 0; i < payloads.size(); i++) {
        try {
          provider.send(payloads.get(i));
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        }
      }
    }
  }
}
