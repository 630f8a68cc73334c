package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Polling;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.annotation.KafkaHandler;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.retrytopic.RetryTopicConfiguration;
import org.springframework.kafka.retrytopic.RetryTopicConfigurationBuilder;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * probeX, on the shared in-JVM KRaft broker: two listener shapes around the starter's wrapped
 * listener ({@code KafkaKeptDeferrals}, 6ab7094e) that no test ran with a broker: an {@code
 * IdempotentListener} on a {@code @KafkaHandler} method of a class-level {@code @KafkaListener}
 * (docs/message-consumers.md: "not tested with a broker"), and an {@code IdempotentListener} that
 * is itself a listener with non-blocking retries (retry topics and a dead-letter handler), whose
 * provider fails once (the record goes to the retry topic) and whose retry then finds the store
 * down: it must be retried on the retry topic, sent once when the store answers, never
 * dead-lettered (SPEC 1, 15).
 */
@SpringBootTest(
    classes = KafkaProbeXRetryAndHandlersProbeTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "idempotency.in-flight-wait=50ms",
      "idempotency.messaging.back-off.initial=50ms",
      "idempotency.messaging.back-off.max=300ms",
      "logging.level.org.springframework.kafka.retrytopic=OFF"
    })
@DirtiesContext
class KafkaProbeXRetryAndHandlersProbeTest {

  static final String HANDLER_TOPIC = "idem.probex.handler";
  static final String RETRY_TOPIC = "idem.probex.retryable";

  /** The retry topics' pause: the test takes the store down within it, after the first failure. */
  static final long RETRY_DELAY_MS = 4000;

  static final List<String> sent = new CopyOnWriteArrayList<>();
  static final List<String> deadLettered = new CopyOnWriteArrayList<>();

  /** The topics each event's listener body ran on, in order. */
  static final Map<String, List<String>> runs = new ConcurrentHashMap<>();

  /** Events whose provider call fails once (a transient failure: the key is released). */
  static final Set<String> failOnce = ConcurrentHashMap.newKeySet();

  static final Map<String, AtomicInteger> failures = new ConcurrentHashMap<>();

  static long sends(String event) {
    return sent.stream().filter(event::equals).count();
  }

  static int failuresOf(String event) {
    AtomicInteger count = failures.get(event);
    return count == null ? 0 : count.get();
  }

  /** A class-level listener whose one {@code @KafkaHandler} method is guarded. */
  @KafkaListener(id = "probex-handler", topics = HANDLER_TOPIC)
  public static class HandlerListener {
    @KafkaHandler
    @IdempotentListener(name = "probex-handler", key = "#event")
    public void onEvent(String event) {
      runs.computeIfAbsent(event, e -> new CopyOnWriteArrayList<>()).add(HANDLER_TOPIC);
      sent.add(event);
    }
  }

  /**
   * A guarded listener with non-blocking retries ({@link App#probexRetryTopics}: three attempts
   * with {@link #RETRY_DELAY_MS} between them, then {@link #deadLetter}). The retry topics are
   * configured with a {@code RetryTopicConfiguration} bean rather than {@code @RetryableTopic},
   * whose {@code backoff} attribute has another annotation type on each Spring Kafka line.
   */
  public static class RetryListener {
    @KafkaListener(id = "probex-retryable", topics = RETRY_TOPIC)
    @IdempotentListener(name = "probex-retryable", key = "#event")
    public void onEvent(String event, @Header(KafkaHeaders.RECEIVED_TOPIC) String topic) {
      runs.computeIfAbsent(event, e -> new CopyOnWriteArrayList<>()).add(topic);
      if (failOnce.remove(event)) {
        failures.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
        throw new IllegalStateException("the provider timed out, nothing sent (test)");
      }
      sent.add(event);
    }

    public void deadLetter(String event) {
      deadLettered.add(event);
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    NewTopic probexHandlerTopic() {
      return new NewTopic(HANDLER_TOPIC, 1, (short) 1);
    }

    @Bean
    NewTopic probexRetryTopic() {
      return new NewTopic(RETRY_TOPIC, 1, (short) 1);
    }

    @Bean
    HandlerListener probexHandlerListener() {
      return new HandlerListener();
    }

    @Bean
    RetryListener probexRetryListener() {
      return new RetryListener();
    }

    @Bean
    RetryTopicConfiguration probexRetryTopics(KafkaTemplate<?, ?> template) {
      return RetryTopicConfigurationBuilder.newInstance()
          .includeTopic(RETRY_TOPIC)
          .maxAttempts(3)
          .fixedBackOff(RETRY_DELAY_MS)
          .autoCreateTopicsWith(1, (short) 1)
          .dltHandlerMethod("probexRetryListener", "deadLetter")
          .create(template);
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired KafkaTemplate<String, String> template;
  @Autowired SwitchableKeyStore store;

  /**
   * A guarded {@code @KafkaHandler}: a record published twice while the store is down is deferred
   * and retried, then sent once when the store answers (the second copy a replay).
   */
  @Test
  void aGuardedKafkaHandlerDefersWhileTheStoreIsDownAndSendsOnce() throws Exception {
    String event = "handler-" + UUID.randomUUID();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    try {
      template.send(HANDLER_TOPIC, event).get(30, TimeUnit.SECONDS);
      template.send(HANDLER_TOPIC, event).get(30, TimeUnit.SECONDS);
      Polling.await("three refusals", () -> store.refused.get() - refusedBefore >= 3);
    } finally {
      store.down.set(false);
    }
    String marker = "handler-marker-" + UUID.randomUUID();
    template.send(HANDLER_TOPIC, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sends(marker) >= 1);

    assertThat(sends(event))
        .as("sends of the event published twice (runs: %s)", runs.get(event))
        .isEqualTo(1);
    assertThat(sends(marker)).as("sends of the marker").isEqualTo(1);
  }

  /**
   * A guarded listener with retry topics whose provider fails once (released; the record goes to
   * the first retry topic), then the store down when the retry topic's attempt comes: the deferral
   * is retried there until the store answers, the record sent once, nothing dead-lettered. 16 to 28
   * s on a loaded machine (the retry topics' pause is 4 s).
   */
  @Tag("extended")
  @Test
  void aRetryTopicsDeferralIsRetriedThereAndSentOnceNeverDeadLettered() throws Exception {
    String event = "retryable-" + UUID.randomUUID();
    failOnce.add(event);
    template.send(RETRY_TOPIC, event).get(30, TimeUnit.SECONDS);
    Polling.await("the first attempt failed", () -> failuresOf(event) >= 1);
    long failedAt = System.nanoTime();
    int refusedBefore = store.refused.get();
    store.down.set(true);
    boolean downInTime = System.nanoTime() - failedAt < TimeUnit.MILLISECONDS.toNanos(2000);
    try {
      // the retry topic's attempt comes RETRY_DELAY_MS after the failure: deferred, then retried
      awaitAtMost(60, () -> store.refused.get() - refusedBefore >= 3 || sends(event) >= 1);
    } finally {
      store.down.set(false);
    }
    int refused = store.refused.get() - refusedBefore;
    awaitAtMost(60, () -> sends(event) >= 1 || deadLettered.contains(event));
    String marker = "retryable-marker-" + UUID.randomUUID();
    template.send(RETRY_TOPIC, marker).get(30, TimeUnit.SECONDS);
    Polling.await("the marker sent", () -> sends(marker) >= 1);

    assertThat(downInTime).as("the store taken down within 2 s of the failure").isTrue();
    assertThat(refused)
        .as("calls refused while the store was down (the retry deferred)")
        .isPositive();
    assertThat(sends(event))
        .as(
            "sends of the record (runs by topic: %s, dead-lettered: %s)",
            runs.get(event), deadLettered.contains(event))
        .isEqualTo(1);
    assertThat(deadLettered).as("dead-lettered").doesNotContain(event);
  }

  /** Waits until the condition holds or {@code seconds} passed; whether it held. */
  private static boolean awaitAtMost(int seconds, BooleanSupplier condition)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(20);
    }
    return true;
  }
}
