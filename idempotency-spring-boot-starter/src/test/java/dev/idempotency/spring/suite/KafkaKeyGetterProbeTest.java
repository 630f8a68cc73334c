package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probeS) of fixpoison2 (91bf176) on the in-JVM Kafka broker: only SpEL's own {@code
 * EvaluationException} makes a key a poison message (dead-lettered at once: here the application's
 * dead-letter topic; under Spring Kafka's default handler, logged and skipped), while a method the
 * expression calls that throws is retried. A record listener keyed by a property read, {@code
 * T(..Lookups).of(#payload).ref}, whose getter throws once (a lazy look-up that timed out): SpEL
 * reports it as its own {@code SpelEvaluationException} ({@code EXCEPTION_DURING_PROPERTY_READ},
 * the getter's exception its cause's cause), while {@code .getRef()} would let it out as it is, and
 * be retried. The promise (SPEC 1: no lost send): each message is sent once.
 */
@Tag("extended") // about 30 s a Boot line, most of it the Kafka application's start
class KafkaKeyGetterProbeTest {

  static final String GETTER_LISTENER = "probe-s-kafka-getter-key";
  static final String NESTED_LISTENER = "probe-s-kafka-nested-key";

  private static SuiteProvider provider;
  private static KafkaListenerApplication application;

  @BeforeAll
  static void start() {
    provider = new SuiteProvider();
    String topic = "idem.probe-s-spel-wrapped-" + UUID.randomUUID();
    application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {GetterKeyListeners.class});
  }

  @AfterAll
  static void stop() {
    if (application != null) {
      application.close();
    }
  }

  /*
   * Was an open finding (probeS, on 5cfa0b8; medium: the message dead-lettered unsent; high under
   * Spring Kafka's default handler, which logs and skips it: a lost send), fixed by
   * ListenerMethod.calledCodeThrew (an exception of a getter or constructor the expression calls
   * is the listener's failure, retried). Failed before on Boot 3.5 and 4.0 (the getter then failed
   * once): "sends of the message whose key getter failed once (dead-lettered: [getter-flaky-...])
   * expected: 1 but was: 0".
   */
  @Test
  void aKeyGetterThatFailsOnceStillSendsTheMessage() throws Exception {
    String event = "getter-flaky-" + UUID.randomUUID();
    application.publish("unused-" + event, event);
    awaitSentOrDeadLettered(GETTER_LISTENER, event);
    Assertions.assertThat(provider.sends(GETTER_LISTENER + ":" + event))
        .as(
            "sends of the message whose key getter failed (dead-lettered: %s)",
            application.deadLettered())
        .isEqualTo(1);
  }

  /*
   * A look-up method that evaluates SpEL of its own over a lazily read value lets SpEL's exception
   * for that read (a SpelEvaluationException) out of the key's expression as it is. Written with
   * the fix of the row above, which covers it (the exception names the getter's failure); not run
   * on the code before it, where it would be taken for the key's own failure by the same path.
   */
  @Test
  void aKeyLookUpWhoseOwnSpelReadFailsStillSendsTheMessage() throws Exception {
    String event = "nested-flaky-" + UUID.randomUUID();
    application.publish("unused-" + event, event);
    awaitSentOrDeadLettered(NESTED_LISTENER, event);
    Assertions.assertThat(provider.sends(NESTED_LISTENER + ":" + event))
        .as(
            "sends of the message whose key look-up's own SpEL read failed (dead-lettered: %s)",
            application.deadLettered())
        .isEqualTo(1);
  }

  private static void awaitSentOrDeadLettered(String listener, String event) throws Exception {
    try {
      Waits.await(
          "the message sent, or dead-lettered",
          () ->
              provider.sends(listener + ":" + event) >= 1
                  || application.deadLettered().contains(event));
    } catch (AssertionError timedOut) {
      // the assertion says what happened
    }
    // a retry of it, if any, comes before a marker published behind it
    String marker = "marker-" + UUID.randomUUID();
    application.publish(marker, marker);
    try {
      Waits.await("the marker sent", () -> provider.sends(GETTER_LISTENER + ":" + marker) >= 1);
    } catch (AssertionError timedOut) {
      // the assertion says what happened
    }
  }

  /**
   * The key's look-up: its value's getter fails the first two times for a payload of "flaky" (SpEL
   * calls a getter a second time where its cached accessor failed).
   */
  public static final class Lookups {
    static final Map<String, AtomicInteger> failures = new ConcurrentHashMap<>();

    private Lookups() {}

    public static Looked of(String payload) {
      return new Looked(payload);
    }

    /** Reads the looked-up value's {@code ref} with SpEL of its own (a generic look-up). */
    public static Object nested(String payload) {
      return new SpelExpressionParser()
          .parseExpression("ref")
          .getValue(new StandardEvaluationContext(new Looked(payload)));
    }
  }

  /** A looked-up key whose reference is read lazily (a remote call, here failing once). */
  public static final class Looked {
    private final String payload;

    Looked(String payload) {
      this.payload = payload;
    }

    public String getRef() {
      if (payload.contains("flaky")
          && Lookups.failures.computeIfAbsent(payload, any -> new AtomicInteger()).incrementAndGet()
              <= 2) {
        throw new IllegalStateException("key look-up timed out (transient)");
      }
      return "ref-" + payload;
    }
  }

  /** The listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class GetterKeyListeners {
    @Bean
    GetterKeyListener getterKeyListener(SuiteProvider provider) {
      return new GetterKeyListener(provider);
    }

    @Bean
    NestedKeyListener nestedKeyListener(SuiteProvider provider) {
      return new NestedKeyListener(provider);
    }
  }

  /** Sends its record's payload, keyed by a getter of a looked-up value. */
  public static class GetterKeyListener {
    private final SuiteProvider provider;

    GetterKeyListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = GETTER_LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}-getter",
        batch = "false")
    @IdempotentListener(
        name = GETTER_LISTENER,
        key =
            "T(dev.idempotency.spring.suite.KafkaKeyGetterProbeTest$Lookups)" + ".of(#payload).ref")
    public void record(String payload) {
      provider.send(GETTER_LISTENER + ":" + payload);
    }
  }

  /** Sends its record's payload, keyed by a look-up that evaluates SpEL of its own. */
  public static class NestedKeyListener {
    private final SuiteProvider provider;

    NestedKeyListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @KafkaListener(
        id = NESTED_LISTENER,
        topics = "${suite.kafka.topic}",
        groupId = "${suite.kafka.topic}-nested",
        batch = "false")
    @IdempotentListener(
        name = NESTED_LISTENER,
        key =
            "T(dev.idempotency.spring.suite.KafkaKeyGetterProbeTest$Lookups)" + ".nested(#payload)")
    public void record(String payload) {
      provider.send(NESTED_LISTENER + ":" + payload);
    }
  }
}
