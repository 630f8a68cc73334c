package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.suite.KafkaTransactionStopFixture.RefusedOnce;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * Probe (probeD, of fixdlt 30e5aaf5): a Kafka batch listener in its container's Kafka transaction
 * whose send is a record it produces to an outbound topic (a notification handed to a sender
 * service that reads it read-committed). It stops at message 1 of {@code [0, 1, 2]} (message 1
 * always fails, {@code BatchDeliveryFailedException(1)}); the error handler has no retries and a
 * recoverer whose first dead letter the producer refuses (over {@code max.request.size}, which
 * leaves the transaction unable to commit) and whose later ones are published. So the first
 * delivery's transaction rolls back once; the redelivery can commit.
 *
 * <ul>
 *   <li>The listener produces in the container's transaction: the abort discards message 0's
 *       record, so message 0 must be released and produced again at the redelivery.
 *   <li>The listener produces in a transaction of its own ({@code executeInTransaction}, a
 *       different producer of the same factory), which commits whatever the container's does:
 *       message 0's record is out, so message 0 must be recorded and its redelivery a replay, as
 *       for a provider call ({@link KafkaTransactionStopRecovererFailsProbeTest}).
 * </ul>
 *
 * <p>The promise (SPEC 1, 15): message 0's outbound record committed once (not lost, not twice),
 * message 2's once, message 1 never produced.
 *
 * <p>Was an open finding (probeD, on 7340e92a: lost send): fixdlt recorded message 0 after every
 * rollback that followed a stop, so in the first case its redelivery was a replay and its record
 * was never produced ("listener calls: 3, recoveries: 2, outbound committed: [0, 0, 1]", Boot 3.5
 * and 4.0). Fixed by fixtxprod: the starter counts the sends of the producer that began the
 * container's transaction ({@code KafkaTransactionSends}) and releases, after such a rollback, a
 * batch whose listener produced through it.
 */
class KafkaTransactionStopRolledBackProduceProbeTest {

  static final String LISTENER = "probe-d-kafka-tx-rolled-back-produce";

  @Tag("extended") // its own application, and up to a minute of waiting for message 0's record
  @Test
  void aRolledBackTransactionAfterAStopLeavesTheOutboundRecordOfTheMessagesBeforeItCommittedOnce()
      throws Exception {
    probe("probe-d-rolled-back-produce", false);
  }

  @Tag("extended") // its own application, and up to a minute of waiting for the records
  @Test
  void aListenerProducingInItsOwnTransactionHasTheMessagesBeforeTheStopProducedOnce()
      throws Exception {
    probe("fixtxprod-own-transaction", true);
  }

  /**
   * Publishes {@code [0, bad-1, 2]} in one batch to a {@link ProducingListener} that produces in
   * the container's transaction, or in its own ({@code ownTransaction}), and checks what was
   * committed on the outbound topic.
   */
  private static void probe(String name, boolean ownTransaction) throws Exception {
    String topic = "idem." + name + "-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaTransactionStopFixture.start(
            name,
            topic,
            new SuiteProvider(),
            ProducingListeners.class,
            "probe-d.own-transaction=" + ownTransaction)) {
      ProducingListener listener = application.context().getBean(ProducingListener.class);
      RefusedOnce recoverer = application.context().getBean(RefusedOnce.class);
      String[] keys = new String[3];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = (i == 1 ? "bad-" : "") + name + "-" + i + "-" + UUID.randomUUID();
      }
      application.publishInOneBatch(keys);
      // message 2 produced (the batch went past the stop), and message 0's record, if it comes;
      // message 2 is produced only after the redelivery of message 0 committed (its record, or
      // a second one, comes before message 2's on the outbound topic's one partition)
      List<String> seen =
          KafkaTransactionStopFixture.awaitCommitted(
              application,
              topic + ".out",
              Duration.ofSeconds(90),
              "messages 0 and 2 produced and committed",
              committed -> committed.contains(keys[0]) && committed.contains(keys[2]));
      String facts =
          "listener calls: "
              + listener.calls()
              + ", recoveries: "
              + recoverer.calls()
              + ", outbound committed: "
              + KafkaTransactionStopFixture.counts(seen, keys)
              + ", dead-lettered: "
              + application.deadLettered().size()
              + ", consumer failures: "
              + application.consumerFailures().size();
      SoftAssertions.assertSoftly(
          softly -> {
            // the first transaction did roll back: a dead letter was refused, one came after it
            softly.assertThat(recoverer.calls()).as("recoveries (" + facts + ")").isGreaterThan(1);
            softly
                .assertThat(Collections.frequency(seen, keys[0]))
                .as("committed outbound records of message 0 (" + facts + ")")
                .isOne();
            softly
                .assertThat(Collections.frequency(seen, keys[1]))
                .as("committed outbound records of message 1 (" + facts + ")")
                .isZero();
            softly
                .assertThat(Collections.frequency(seen, keys[2]))
                .as("committed outbound records of message 2 (" + facts + ")")
                .isOne();
          });
    }
  }

  /** The listener ({@link KafkaTransactionStopFixture} adds its topic and error handler). */
  @Configuration(proxyBeanMethods = false)
  static class ProducingListeners {
    @Bean
    ProducingListener probeDProducingListener(
        KafkaTemplate<Object, Object> template,
        @Value("${suite.kafka.topic}") String topic,
        @Value("${probe-d.own-transaction:false}") boolean ownTransaction) {
      return new ProducingListener(template, topic + ".out", ownTransaction);
    }
  }

  /**
   * Produces each payload of its list, in order, to the outbound topic, in the container's
   * transaction or in one of its own that commits at once ({@code ownTransaction}); one that starts
   * with {@code bad-} always fails.
   */
  public static class ProducingListener {
    private final KafkaTemplate<Object, Object> template;
    private final String outbound;
    private final boolean ownTransaction;
    private final AtomicInteger calls = new AtomicInteger();

    ProducingListener(
        KafkaTemplate<Object, Object> template, String outbound, boolean ownTransaction) {
      this.template = template;
      this.outbound = outbound;
      this.ownTransaction = ownTransaction;
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
            throw new IllegalStateException("the notification is refused for this recipient");
          }
          if (ownTransaction) {
            template.executeInTransaction(
                own -> own.send(outbound, 0, null, payload).join()); // committed on return
          } else {
            template.send(outbound, 0, null, payload).get(30, TimeUnit.SECONDS);
          }
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        } catch (Exception interruptedOrFailed) {
          throw new BatchDeliveryFailedException(
              i, new IllegalStateException("not produced", interruptedOrFailed));
        }
      }
    }
  }
}
