package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probeQ) of fixpoison (b5ba4f1, merged in dd6498c) on the in-JVM Kafka broker: a key
 * expression that fails for a message makes it a poison message, which Spring Kafka's {@code
 * DefaultErrorHandler} does not retry (its recoverer takes it at once: here the application's
 * dead-letter topic; under Spring Kafka's default handler, log and skip). {@code
 * ListenerMethod.evaluate} treats every {@code RuntimeException} of the evaluation so, a transient
 * one too. A record listener keyed by {@code T(...Keys).of(#payload)}, a key look-up that fails
 * once for a message (as a lookup service's timeout does), then answers. The promise (SPEC 1: no
 * lost send): the message is sent once.
 */
class KafkaTransientKeyExpressionProbeTest {

  static final String LISTENER = "probe-q-kafka-transient-key";

  /*
   * Was an open finding, fixed by fixpoison2 (only SpEL's own evaluation errors make a poison
   * message; a method the expression calls that throws is retried). It read: (probeQ, on dd6498c;
   * medium here, the message dead-lettered unsent; high under
   * Spring Kafka's default handler, which logs and skips it: a lost send). Fails on Boot 3.5 and
   * 4.0 alike: "sends of the message whose key look-up failed once (dead-lettered: [flaky-...])
   * expected: 1 but was: 0".
   */
  @Test
  void aKeyLookUpThatFailsOnceStillSendsTheMessage() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-q-transient-key-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {TransientKeyListeners.class})) {
      String event = "flaky-" + UUID.randomUUID();
      application.publish("unused-" + event, event);
      try {
        Waits.await(
            "the message sent, or dead-lettered",
            () -> provider.sends(event) >= 1 || !application.deadLettered().isEmpty());
      } catch (AssertionError timedOut) {
        // the assertion says what happened
      }
      String marker = "marker-" + UUID.randomUUID();
      application.publish(marker, marker);
      try {
        Waits.await("the marker sent", () -> provider.sends(marker) >= 1);
      } catch (AssertionError timedOut) {
        // the assertion says what happened
      }
      List<String> deadLettered = application.deadLettered();
      org.assertj.core.api.Assertions.assertThat(provider.sends(event))
          .as(
              "sends of the message whose key look-up failed once (dead-lettered: %s)",
              deadLettered)
          .isEqualTo(1);
    }
  }

  /** The key look-up: fails the first time it is asked for a payload holding "flaky". */
  public static final class Keys {
    static final Set<String> failedOnce = ConcurrentHashMap.newKeySet();

    private Keys() {}

    public static String of(String payload) {
      if (payload.contains("flaky") && failedOnce.add(payload)) {
        throw new IllegalStateException("key look-up timed out (transient)");
      }
      return "key-" + payload;
    }
  }

  /** The listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class TransientKeyListeners {
    @Bean
    TransientKeyListener transientKeyListener(SuiteProvider provider) {
      return new TransientKeyListener(provider);
    }
  }

  /** Sends its record's payload. */
  public static class TransientKeyListener {
    private final SuiteProvider provider;

    TransientKeyListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "false")
    @IdempotentListener(
        name = LISTENER,
        key =
            "T(dev.idempotency.spring.suite.KafkaTransientKeyExpressionProbeTest$Keys).of(#payload)")
    public void record(String payload) {
      provider.send(payload);
    }
  }
}
