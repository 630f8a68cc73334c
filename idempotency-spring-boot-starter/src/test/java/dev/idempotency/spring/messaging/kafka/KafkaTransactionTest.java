package dev.idempotency.spring.messaging.kafka;

import static dev.idempotency.spring.messaging.Polling.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.spring.messaging.Sends;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.support.SendResult;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Issue 37, item 7, on a real Kafka broker: listener containers with a Kafka transaction (Spring
 * Boot configures one when {@code spring.kafka.producer.transaction-id-prefix} is set). The
 * container commits the consumer offsets and the records the listener produced after the listener
 * returned; an outcome is recorded only once that commit succeeded. A commit that fails rolls the
 * transaction back at the broker, which delivers the record again: the listener must run again, or
 * its produced records would be lost for good.
 */
@SpringBootTest(
    classes = KafkaTransactionTest.App.class,
    properties = {
      "spring.kafka.consumer.auto-offset-reset=earliest",
      "spring.kafka.consumer.isolation-level=read-committed",
      "spring.kafka.producer.transaction-id-prefix=idem-tx-"
    })
@DirtiesContext
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class KafkaTransactionTest {

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @Import(ListenerTestConfiguration.class)
  static class App {
    @Bean
    FailingCommits kafkaTransactionManager(ProducerFactory<Object, Object> producers) {
      return new FailingCommits(producers);
    }

    @Bean
    KafkaTransactionListeners kafkaTransactionListeners(
        Sends sends, KafkaTemplate<Object, Object> template, FailingCommits commits) {
      return new KafkaTransactionListeners(sends, template, commits);
    }
  }

  @DynamicPropertySource
  static void kafka(DynamicPropertyRegistry registry) {
    EmbeddedKafka.addProperties(registry);
  }

  @Autowired Sends sends;
  @Autowired Events events;
  @Autowired IdempotencyGuard guard;
  @Autowired FailingCommits commits;
  @Autowired KafkaTemplate<Object, Object> template;
  @Autowired KafkaAdmin kafkaAdmin;
  @Autowired ConsumerFactory<Object, Object> consumers;
  @Autowired KafkaListenerEndpointRegistry registry;
  Admin admin;

  @BeforeAll
  void admin() {
    admin = Admin.create(kafkaAdmin.getConfigurationProperties());
  }

  @AfterAll
  void closeAdmin() {
    admin.close();
  }

  private static String unique(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  @Test
  void aDeliveryWhoseTransactionFailedToCommitRunsAgainWhenTheBrokerRedeliversIt()
      throws Exception {
    String event = unique("commit-fails");
    commits.failNextCommitOf(event);
    publish("idem.tx", event);

    await(
        "the redelivery after the failed commit, run or replayed",
        () ->
            sends.runs(event) >= 2
                || events.count(Type.REPLAYED, KafkaTransactionListeners.RECORD, event) > 0);
    assertThat(events.count(Type.REPLAYED, KafkaTransactionListeners.RECORD, event))
        .as("the redelivery of a delivery whose transaction rolled back is not a replay")
        .isZero();
    assertThat(sends.runs(event)).as("the listener ran again for the redelivery").isEqualTo(2);
    assertRecorded(KafkaTransactionListeners.RECORD, event);
    assertThat(events.count(Type.RELEASED, KafkaTransactionListeners.RECORD, event))
        .as("the rolled-back delivery released its key")
        .isEqualTo(1);
    await("the produced record committed", () -> produced().contains(event));
    assertThat(produced())
        .as("what the listener produced: the rolled-back copy is gone, the committed one stays")
        .containsOnlyOnce(event);
  }

  @Test
  void aDeliveryWhoseTransactionCommittedIsRecordedAndItsRedeliveryIsAReplay() throws Exception {
    String event = unique("commits");
    long offset = publish("idem.tx", event);

    await(
        "the outcome recorded",
        () -> events.count(Type.COMPLETED, KafkaTransactionListeners.RECORD, event) == 1);
    assertRecorded(KafkaTransactionListeners.RECORD, event);
    await("the produced record committed", () -> produced().contains(event));

    // the broker delivers it again: the group's offset is moved back to it
    long replays = events.count(Type.REPLAYED, KafkaTransactionListeners.RECORD, event);
    redeliverFrom(KafkaTransactionListeners.RECORD, "idem.tx", offset);
    await(
        "the redelivery replayed",
        () -> events.count(Type.REPLAYED, KafkaTransactionListeners.RECORD, event) > replays);
    assertThat(sends.runs(event)).as("the listener ran for the first delivery only").isEqualTo(1);
    assertThat(produced()).containsOnlyOnce(event);
  }

  @Test
  void aBatchWhoseTransactionFailedToCommitRunsAgainWhenTheBrokerRedeliversIt() throws Exception {
    String first = unique("b-first");
    String last = unique("b-last");
    commits.failNextCommitOf(last);
    publish("idem.tx-batch", first);
    publish("idem.tx-batch", last);
    registry.getListenerContainer(KafkaTransactionListeners.BATCH).start();
    try {
      await(
          "the redelivery after the failed commit, run or replayed",
          () ->
              (sends.runs(first) >= 2 && sends.runs(last) >= 2)
                  || events.count(Type.REPLAYED, KafkaTransactionListeners.BATCH, last) > 0);
      assertThat(events.count(Type.REPLAYED, KafkaTransactionListeners.BATCH, last)).isZero();
      assertThat(sends.runs(first)).isEqualTo(2);
      assertThat(sends.runs(last)).isEqualTo(2);
      assertRecorded(KafkaTransactionListeners.BATCH, first);
      assertRecorded(KafkaTransactionListeners.BATCH, last);
      await(
          "the produced records committed",
          () -> produced().contains(first) && produced().contains(last));
      assertThat(produced()).containsOnlyOnce(first, last);
    } finally {
      registry.getListenerContainer(KafkaTransactionListeners.BATCH).stop();
    }
  }

  /**
   * SPEC 15: a delivery whose key is in flight elsewhere comes back later and is never given up, in
   * a container transaction too, where the container's after-rollback processor decides what
   * becomes of a delivery rolled back (Spring Kafka's default: ten tries, then the record is
   * skipped).
   */
  @Test
  void aDeliveryInFlightElsewhereComesBackUntilItIsReplayedAndIsNeverSkipped() throws Exception {
    String event = unique("in-flight");
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CompletableFuture<String> elsewhere = new CompletableFuture<>();
    CompletableFuture.runAsync(
        () -> {
          try {
            elsewhere.complete(
                guard.execute(
                    IdempotencyKey.of(KafkaTransactionListeners.RECORD, event),
                    Duration.ofHours(1),
                    context -> {
                      started.countDown();
                      release.await();
                      return "sent-elsewhere";
                    }));
          } catch (RuntimeException e) {
            elsewhere.completeExceptionally(e);
          }
        });
    assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
    try {
      publish("idem.tx", event);
      await(
          "12 deferrals, more than the after-rollback processor's ten tries",
          () ->
              events.count(Type.IN_PROGRESS_CONFLICT, KafkaTransactionListeners.RECORD, event)
                  >= 12);
    } finally {
      release.countDown();
    }
    assertThat(elsewhere.get(30, TimeUnit.SECONDS)).isEqualTo("sent-elsewhere");
    await(
        "the replay",
        () -> events.count(Type.REPLAYED, KafkaTransactionListeners.RECORD, event) >= 1);
    assertThat(sends.runs(event)).as("the listener never ran for the key").isZero();
  }

  /** Waits for a send's outcome to be recorded, then proves it by a replay through the store. */
  private void assertRecorded(String listener, String event) throws Exception {
    await("the outcome recorded", () -> events.count(Type.COMPLETED, listener, event) == 1);
    AtomicBoolean ranAgain = new AtomicBoolean();
    guard.execute(
        IdempotencyKey.of(listener, event),
        Duration.ofHours(1),
        context -> {
          ranAgain.set(true);
          return "again";
        });
    assertThat(ranAgain).as("a repeat of the key through the store is a replay").isFalse();
  }

  /** Publishes in a transaction of its own; returns the record's offset. */
  private long publish(String topic, String event) throws Exception {
    SendResult<Object, Object> sent =
        template
            .executeInTransaction(operations -> operations.send(topic, event))
            .get(30, TimeUnit.SECONDS);
    return sent.getRecordMetadata().offset();
  }

  /** Moves a listener's group back to {@code offset}, so that the broker delivers it again. */
  private void redeliverFrom(String listener, String topic, long offset) throws Exception {
    registry.getListenerContainer(listener).stop();
    try {
      admin
          .alterConsumerGroupOffsets(
              listener, Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(offset)))
          .all()
          .get(30, TimeUnit.SECONDS);
    } finally {
      registry.getListenerContainer(listener).start();
    }
  }

  /** What the listeners produced and committed, read as a {@code read_committed} consumer. */
  private List<String> produced() {
    TopicPartition partition = new TopicPartition(KafkaTransactionListeners.OUTPUT, 0);
    Properties properties = new Properties();
    properties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    List<String> payloads = new ArrayList<>();
    try (Consumer<Object, Object> consumer =
        consumers.createConsumer("out-reader-" + UUID.randomUUID(), null, null, properties)) {
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      long end = consumer.endOffsets(List.of(partition)).get(partition);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (consumer.position(partition) < end && System.nanoTime() < deadline) {
        for (ConsumerRecord<Object, Object> record : consumer.poll(Duration.ofMillis(200))) {
          payloads.add(String.valueOf(record.value()));
        }
      }
    }
    return payloads;
  }
}
