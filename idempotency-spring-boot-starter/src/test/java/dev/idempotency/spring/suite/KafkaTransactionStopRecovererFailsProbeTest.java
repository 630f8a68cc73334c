package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.TopicPartition;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.ConsumerRecordRecoverer;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.util.backoff.FixedBackOff;

/**
 * Probe (probeA, of kafkatx b7400f9c): a Kafka batch listener in its container's Kafka transaction
 * stops at message 1 of {@code [0, 1, 2]} (message 1 always fails, {@code
 * BatchDeliveryFailedException(1)}); the application's error handler has no retries and a
 * recoverer, and the recovery of message 1 fails. kafkatx has the transaction commit message 0
 * (sent) with its offset at the stop, when the handler sought back to message 1. Two ways the
 * recovery fails:
 *
 * <ul>
 *   <li>{@code recoverer-throws}: the application's recoverer throws before it publishes anything
 *       (its dead-letter store is down);
 *   <li>{@code dead-letter-too-large}: Spring Kafka's {@link DeadLetterPublishingRecoverer} on the
 *       container's transactional template, whose dead letter (the record with the failure's stack
 *       trace in its headers) is larger than the producer's {@code max.request.size}: the producer
 *       refuses it ({@code RecordTooLargeException}), which also puts the transaction in an
 *       abortable error state, so the commit of message 0 cannot happen.
 * </ul>
 *
 * The promise (SPEC 1, 15): message 0 sent once; message 1 never sent (it always fails) and never
 * dead-lettered (the recovery fails); message 2 sent at most once.
 */
class KafkaTransactionStopRecovererFailsProbeTest {

  static final String LISTENER = "probe-a-kafka-tx-recoverer-fails";

  /** The recoverer fails on its own, the transaction is sound: message 0 is committed. */
  @Tag("extended") // its own application, and 40 s of watching for a second send
  @Test
  void aRecovererThatThrowsLeavesTheMessagesBeforeTheStopSentOnce() throws Exception {
    probe("recoverer-throws");
  }

  /*
   * Was an open finding (probeA, on ad1148aa: a second send, repeated at every redelivery while the
   * dead letter could not be published; "sends of the three: [2, 0, 0]" on Boot 3.5, and 3 or 4
   * sends of message 0 a moment later). The producer refuses the dead letter
   * ("RecordTooLargeException: The message is 7771 bytes when serialized which is larger than
   * 2000"), which puts the container's transaction in an abortable error state; the handler seeks
   * back to message 1 and KafkaTransactionBatchStops has the transaction commit message 0's offset,
   * but the container's own sendOffsetsToTransaction after the handler fails ("Cannot execute
   * transactional method because we are in an error state"): the transaction rolls back and the
   * after-rollback processor's seek delivers message 0 again. It used to be released, and sent
   * again; since fixdlt a rollback after such a stop records the messages before it (their offsets
   * were committed by the handler outside the transaction), so the redelivery is a replay.
   */
  @Tag("extended") // its own application, and 40 s of watching for a second send
  @Test
  void aDeadLetterThePoisonedTransactionCannotPublishLeavesTheMessagesBeforeTheStopSentOnce()
      throws Exception {
    probe("dead-letter-too-large");
  }

  private static void probe(String row) throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String name = "probe-a-recoverer-" + row;
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            new SwitchableKeyStore(),
            provider,
            new CountDownLatch(1),
            "idem." + name + "-" + UUID.randomUUID(),
            "none",
            new Class<?>[] {RecovererListeners.class},
            "probe.recoverer=" + row,
            // a dead letter carries the failure's stack trace in its headers, a few KB; the
            // messages themselves are a few hundred bytes
            "spring.kafka.producer.properties.max.request.size=2000",
            "spring.kafka.producer.transaction-id-prefix=" + name + UUID.randomUUID(),
            "spring.kafka.consumer.isolation-level=read-committed")) {
      StopListener listener = application.context().getBean(StopListener.class);
      String[] keys = new String[3];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = (i == 1 ? "bad-" : "") + name + "-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      try {
        // message 0 sent, then 40 s (a few redeliveries) in which a second send may come
        Poll.within(Duration.ofSeconds(60))
            .every(Duration.ofMillis(100))
            .until("message 0 sent", () -> provider.sends(keys[0]) >= 1);
        Poll.within(Duration.ofSeconds(40))
            .every(Duration.ofMillis(100))
            .until(
                "a message sent twice",
                () -> Arrays.stream(keys).anyMatch(key -> provider.sends(key) >= 2));
      } catch (AssertionError timedOut) {
        // the assertions say what happened
      }
      List<String> deadLettered = application.deadLettered();
      String facts =
          row
              + ": listener calls: "
              + listener.calls()
              + ", sends of the three: "
              + Arrays.stream(keys).map(provider::sends).toList()
              + ", dead-lettered: "
              + Arrays.stream(keys).filter(deadLettered::contains).count()
              + ", consumer failures: "
              + application.consumerFailures().size();
      SoftAssertions.assertSoftly(
          softly -> {
            // the batch came back from message 1 at least once: message 0 was delivered again
            softly
                .assertThat(listener.calls())
                .as("listener calls (" + facts + ")")
                .isGreaterThanOrEqualTo(2);
            softly
                .assertThat(provider.sends(keys[0]))
                .as("sends of message 0 (" + facts + ")")
                .isOne();
            softly
                .assertThat(provider.sends(keys[1]))
                .as("sends of message 1 (" + facts + ")")
                .isZero();
            softly
                .assertThat(provider.sends(keys[2]))
                .as("sends of message 2 (" + facts + ")")
                .isLessThanOrEqualTo(1);
          });
    }
  }

  /** The listener, and an error handler (primary: the suite application has its own). */
  @Configuration(proxyBeanMethods = false)
  static class RecovererListeners {
    @Bean
    StopListener probeAStopListener(SuiteProvider provider) {
      return new StopListener(provider);
    }

    @Bean
    @Primary
    CommonErrorHandler probeARecovererFails(
        KafkaTemplate<Object, Object> template, @Value("${probe.recoverer}") String row) {
      ConsumerRecordRecoverer recoverer =
          row.equals("recoverer-throws")
              ? (record, failure) -> {
                throw new IllegalStateException("the dead-letter store is down");
              }
              : new DeadLetterPublishingRecoverer(
                  template, (record, failure) -> new TopicPartition(record.topic() + ".DLT", 0));
      return new DefaultErrorHandler(recoverer, new FixedBackOff(0, 0));
    }
  }

  /** Sends each payload of its list, in order; one that starts with {@code bad-} always fails. */
  public static class StopListener {
    private final SuiteProvider provider;
    private final AtomicInteger calls = new AtomicInteger();

    StopListener(SuiteProvider provider) {
      this.provider = provider;
    }

    int calls() {
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
      for (int i = 0; i < payloads.size(); i++) {
        try {
          String payload = payloads.get(i);
          if (payload.startsWith("bad-")) {
            throw new IllegalStateException("the provider is out for this recipient");
          }
          provider.send(payload);
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        }
      }
    }
  }
}
