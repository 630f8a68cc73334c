package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * Probe (probeI, of fixkafka2's classification of deferrals): the starter's handler for deferrals
 * classifies no exception as fatal, but the application's handler keeps Spring Kafka's default
 * classification for the listener's own failures. A record listener whose provider fails with a
 * {@code ClassCastException} (one of Spring Kafka's default fatal exceptions) is not tried again:
 * the suite's handler (three tries, then the {@code .DLT} topic) dead-letters it at its first
 * failure, as without the starter; its key is released (a transient failure), never sent.
 */
class KafkaProviderFatalProbeTest {

  static final String LISTENER = "probe-kafka-provider-fatal";

  @Test
  void aProvidersFatalExceptionStaysFatalToTheApplicationsHandler() throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem.probe-provider-fatal-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            topic,
            "none",
            new Class<?>[] {FatalListeners.class})) {
      FatalListener listener = application.context().getBean(FatalListener.class);
      String key = "fatal-" + UUID.randomUUID();
      application.publish(key, key);
      Waits.await("the message dead-lettered", () -> application.deadLettered().contains(key));
      application.awaitAcknowledged();
      org.assertj.core.api.Assertions.assertThat(listener.calls())
          .as("listener calls (dead-lettered: " + application.deadLettered() + ")")
          .isEqualTo(1);
      org.assertj.core.api.Assertions.assertThat(provider.sends(key)).as("sends").isZero();
    }
  }

  /** The failing listener, added to the suite's Kafka application. */
  @Configuration(proxyBeanMethods = false)
  static class FatalListeners {
    @Bean
    FatalListener fatalListener() {
      return new FatalListener();
    }
  }

  /** Its provider always fails with a {@code ClassCastException}. */
  public static class FatalListener {
    private final AtomicInteger calls = new AtomicInteger();

    /** How often the listener ran. */
    public int calls() {
      return calls.get();
    }

    @KafkaListener(id = LISTENER, topics = "${suite.kafka.topic}", groupId = "${suite.kafka.topic}")
    @IdempotentListener(name = LISTENER)
    public void record(String payload) {
      calls.incrementAndGet();
      throw new ClassCastException("the provider's reply was of an unexpected type (test)");
    }
  }
}
