package dev.idempotency.spring.messaging.kafka;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Lazy;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Regression (issue 37, SPEC 15 and 16), on a real in-JVM KRaft Kafka broker: {@code @Idempotent}
 * on a {@code @KafkaListener} of a {@code @Lazy} bean, created after the application started
 * (Spring Kafka then registers and starts its container at once), in a container-managed Kafka
 * transaction. The same listener on an eager bean waits for the container's commit ({@code
 * KafkaIdempotentMethodTransactionTest}); this one is expected to as well: a commit that fails
 * releases the key and the broker's redelivery runs the listener again, never a replay.
 */
@SpringBootTest(
    classes = LazyKafkaListenerTransactionTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "spring.kafka.consumer.isolation-level=read-committed",
      "spring.kafka.producer.transaction-id-prefix=idem-lazy-tx-"
    })
@DirtiesContext
class LazyKafkaListenerTransactionTest {

  static final String NAME = "kafka-lazy-tx-method";
  static final String TOPIC = "idem.lazy-tx-method";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    FailingCommits kafkaTransactionManager(ProducerFactory<Object, Object> producers) {
      return new FailingCommits(producers);
    }

    @Bean
    @Lazy
    LazyListener lazyListener(KafkaTemplate<Object, Object> template, FailingCommits commits) {
      return new LazyListener(template, commits);
    }
  }

  /** A listener guarded with {@code @Idempotent}, producing its event in the container's tx. */
  public static class LazyListener {
    final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    private final KafkaTemplate<Object, Object> template;
    private final FailingCommits commits;

    LazyListener(KafkaTemplate<Object, Object> template, FailingCommits commits) {
      this.template = template;
      this.commits = commits;
    }

    @KafkaListener(id = NAME, topics = TOPIC)
    @Idempotent(name = NAME, key = "#event")
    public void onEvent(String event) {
      runs.computeIfAbsent(event, e -> new AtomicInteger()).incrementAndGet();
      template.send(KafkaTransactionListeners.OUTPUT, event);
      commits.running(event);
    }

    int runs(String event) {
      AtomicInteger count = runs.get(event);
      return count == null ? 0 : count.get();
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    registry.add("spring.kafka.bootstrap-servers", EmbeddedKafka::bootstrapServers);
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }

  @Autowired Events events;
  @Autowired FailingCommits commits;
  @Autowired KafkaTemplate<Object, Object> template;
  @Autowired ObjectProvider<LazyListener> listeners;

  @Test
  void aLazyListenerWhoseContainerCommitFailedRunsAgainWhenTheBrokerRedeliversIt()
      throws Exception {
    LazyListener listener = listeners.getObject(); // created now: its container starts now
    String event = "lazy-commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    template
        .executeInTransaction(operations -> operations.send(TOPIC, event))
        .get(30, TimeUnit.SECONDS);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> listener.runs(event) >= 2 || events.count(Type.REPLAYED, NAME, event) > 0);
    assertThat(events.count(Type.REPLAYED, NAME, event))
        .as(
            "the redelivery of a delivery whose container transaction rolled back is not a replay"
                + " (listener runs %d, events %s)",
            listener.runs(event), events.operations(NAME, event))
        .isZero();
    assertThat(listener.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
  }
}
