package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probeS) of fixpoison (b5ba4f1) and fixpoison2 (91bf176) on the in-JVM Kafka broker: a key
 * expression SpEL cannot work out for a message makes it a poison message (dead-lettered at once:
 * here the application's dead-letter topic; under Spring Kafka's default handler, logged and
 * skipped). A key expression that calls an application bean, {@code @probeSKeys.of(#payload)}, is
 * valid SpEL that Spring's own annotations ({@code @Cacheable}, {@code @PreAuthorize}) evaluate;
 * the listener's evaluation context has no bean resolver, so it fails for every message (EL1057E).
 * The promise (SPEC 1: no lost send): the message is sent once, or the application is refused at
 * startup, never every message dead-lettered unsent.
 */
class KafkaBeanKeyExpressionProbeTest {

  static final String LISTENER = "probe-s-kafka-bean-key";

  /*
   * Was an open finding (probeS, on 5cfa0b8; high: every message of a listener keyed by a bean
   * reference dead-lettered unsent, logged and skipped under Spring Kafka's default handler, and
   * the application started), fixed by ListenerMethod.refuseBeanReferences (refused at startup).
   * Failed before on Boot 3.5 and 4.0: "sends of a message of a listener keyed by
   * @probeSKeys.of(#payload) (dead-lettered: [bean-...]) expected: 1 but was: 0".
   */
  @Test
  void aKeyExpressionCallingABeanSendsTheMessageOrIsRefusedAtStartup() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-s-bean-key-" + UUID.randomUUID();
    KafkaListenerApplication application;
    try {
      application =
          KafkaListenerApplication.start(
              new SwitchableKeyStore(),
              provider,
              new CountDownLatch(1),
              topic,
              "none",
              new Class<?>[] {BeanKeyListeners.class});
    } catch (RuntimeException refused) {
      Assertions.assertThat(rootMessage(refused)).as("the startup refusal").contains("@probeSKeys");
      return;
    }
    try (application) {
      String event = "bean-" + UUID.randomUUID();
      application.publish("unused-" + event, event);
      try {
        Waits.await(
            "the message sent, or dead-lettered",
            () -> provider.sends(event) >= 1 || application.deadLettered().contains(event));
      } catch (AssertionError timedOut) {
        // the assertion says what happened
      }
      Assertions.assertThat(provider.sends(event))
          .as(
              "sends of a message of a listener keyed by @probeSKeys.of(#payload) (dead-lettered:"
                  + " %s)",
              application.deadLettered())
          .isEqualTo(1);
    }
  }

  private static String rootMessage(Throwable failure) {
    Throwable root = failure;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    return String.valueOf(root.getMessage());
  }

  /** The application's key bean. */
  public static final class ProbeSKeys {
    public String of(String payload) {
      return "key-" + payload;
    }
  }

  /** The listener and its key bean, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class BeanKeyListeners {
    @Bean
    ProbeSKeys probeSKeys() {
      return new ProbeSKeys();
    }

    @Bean
    BeanKeyListener beanKeyListener(SuiteProvider provider) {
      return new BeanKeyListener(provider);
    }
  }

  /** Sends its record's payload, keyed by an application bean. */
  public static class BeanKeyListener {
    private final SuiteProvider provider;

    BeanKeyListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}",
        batch = "false")
    @IdempotentListener(name = LISTENER, key = "@probeSKeys.of(#payload)")
    public void record(String payload) {
      provider.send(payload);
    }
  }
}
