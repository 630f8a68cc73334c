package dev.idempotency.spring.messaging.kafka;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
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
 * {@code @Idempotent} on a {@code @KafkaListener} in a container-managed Kafka transaction, on a
 * real Kafka broker (issue 37, SPEC 15 and 16): its outcome waits for the container's commit, as an
 * {@code IdempotentListener}'s does ({@code KafkaTransactionTest}). A commit that fails releases
 * the key, so the broker's redelivery runs the listener again (the record it produced in the
 * rolled-back transaction is produced again); a delivery whose transaction committed is recorded,
 * and a repeat of its key is a replay. The same listener on a {@code @Lazy} bean, created after the
 * application started (Spring Kafka then registers and starts its container at once), waits for the
 * commit too (issue 37's regression: its container got the starter's hooks only once they were
 * applied to containers created after the start).
 */
@SpringBootTest(
    classes = KafkaIdempotentMethodTransactionTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "spring.kafka.consumer.isolation-level=read-committed",
      "spring.kafka.producer.transaction-id-prefix=idem-method-tx-"
    })
@DirtiesContext
class KafkaIdempotentMethodTransactionTest {

  static final String NAME = "kafka-tx-method";
  static final String TOPIC = "idem.tx-method";
  static final String LAZY_NAME = "kafka-lazy-tx-method";
  static final String LAZY_TOPIC = "idem.lazy-tx-method";

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    FailingCommits kafkaTransactionManager(ProducerFactory<Object, Object> producers) {
      return new FailingCommits(producers);
    }

    @Bean
    MethodListener methodListener(KafkaTemplate<Object, Object> template, FailingCommits commits) {
      return new MethodListener(template, commits);
    }

    @Bean
    @Lazy
    LazyListener lazyListener(KafkaTemplate<Object, Object> template, FailingCommits commits) {
      return new LazyListener(template, commits);
    }
  }

  /** A listener guarded with {@code @Idempotent}, producing its event in the container's tx. */
  public static class MethodListener extends TransactionalRuns {
    MethodListener(KafkaTemplate<Object, Object> template, FailingCommits commits) {
      super(template, commits);
    }

    @KafkaListener(id = NAME, topics = TOPIC)
    @Idempotent(name = NAME, key = "#event")
    public void onEvent(String event) {
      run(event);
    }
  }

  /** The same on a {@code @Lazy} bean: its container is created when the bean is. */
  public static class LazyListener extends TransactionalRuns {
    LazyListener(KafkaTemplate<Object, Object> template, FailingCommits commits) {
      super(template, commits);
    }

    @KafkaListener(id = LAZY_NAME, topics = LAZY_TOPIC)
    @Idempotent(name = LAZY_NAME, key = "#event")
    public void onEvent(String event) {
      run(event);
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired Events events;
  @Autowired FailingCommits commits;
  @Autowired KafkaTemplate<Object, Object> template;
  @Autowired MethodListener listener;
  @Autowired ObjectProvider<LazyListener> lazyListeners;

  @Test
  void aDeliveryWhoseContainerCommitFailedRunsAgainWhenTheBrokerRedeliversIt() throws Exception {
    assertACommitThatFailsRunsAgain(listener, NAME, TOPIC);
  }

  @Test
  void aLazyListenerWhoseContainerCommitFailedRunsAgainWhenTheBrokerRedeliversIt()
      throws Exception {
    LazyListener lazy = lazyListeners.getObject(); // created now: its container starts now
    assertACommitThatFailsRunsAgain(lazy, LAZY_NAME, LAZY_TOPIC);
  }

  private void assertACommitThatFailsRunsAgain(
      TransactionalRuns listener, String name, String topic) throws Exception {
    String event = "commit-fails-" + UUID.randomUUID().toString().substring(0, 8);
    commits.failNextCommitOf(event);
    publish(topic, event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () -> listener.runs(event) >= 2 || events.count(Type.REPLAYED, name, event) > 0);
    assertThat(events.count(Type.REPLAYED, name, event))
        .as(
            "the redelivery of a delivery whose container transaction rolled back is not a replay"
                + " (listener runs %d, events %s)",
            listener.runs(event), events.operations(name, event))
        .isZero();
    assertThat(listener.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
    assertThat(events.count(Type.RELEASED, name, event))
        .as("the rolled-back delivery released its key")
        .isEqualTo(1);
    await(
        "the second run's outcome recorded after its commit",
        () -> events.count(Type.COMPLETED, name, event) == 1);
  }

  @Test
  void aDeliveryWhoseTransactionCommittedIsRecordedAndARepeatIsAReplay() throws Exception {
    String event = "commits-" + UUID.randomUUID().toString().substring(0, 8);
    publish(TOPIC, event);
    await(
        "the outcome recorded after the commit",
        () -> events.count(Type.COMPLETED, NAME, event) == 1);

    publish(TOPIC, event);
    await("the repeat replayed", () -> events.count(Type.REPLAYED, NAME, event) == 1);
    assertThat(listener.runs(event)).as("the listener ran for the first message only").isEqualTo(1);
  }

  private void publish(String topic, String event) throws Exception {
    template
        .executeInTransaction(operations -> operations.send(topic, event))
        .get(30, TimeUnit.SECONDS);
  }
}
