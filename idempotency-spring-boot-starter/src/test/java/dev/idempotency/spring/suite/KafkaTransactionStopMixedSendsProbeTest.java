package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.suite.KafkaTransactionStopFixture.RefusedOnce;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
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
 * Probe (probeF, of fixtxprod ba364c18): as {@link KafkaTransactionStopRolledBackProduceProbeTest},
 * a Kafka batch listener in its container's Kafka transaction stops at a message that always fails
 * and the first dead letter is refused (the container's transaction rolls back once), but the
 * listener sends each message its own way: a record produced in the container's transaction for
 * some ({@code tx-}), a provider call for others ({@code call-}), in one batch {@code [tx-0,
 * call-1, bad-2, tx-3]}. The promise (SPEC 1, 15): message 0's record committed once, message 1
 * sent to the provider once, message 3's record committed once, message 2 never.
 *
 * <p>Was an open finding (probeF, on 996cdcf6, Boot 3.5 and 4.0; a second send): after the rollback
 * the starter released the whole batch before the stop, since the listener produced in the
 * transaction, so message 1's provider call was made again at the redelivery ("listener calls: 3,
 * recoveries: 2, outbound committed: [1, 0, 0, 1], provider sends of message 1: 2, dead-lettered:
 * 1"). Fixed by fixmixed: each record produced in the transaction counts for the message the
 * listener read last ({@code TransactionProduces}); after the rollback only message 0 is released,
 * message 1 recorded.
 *
 * <p>The second case is where the records cannot be told apart by message: the listener copies its
 * list before producing ({@code [tx-0, bad-1, tx-2]}), so every message was read before its first
 * record; the whole batch is released, as before the fix, and message 0's record, discarded by the
 * abort, is produced again: committed once, not lost.
 */
class KafkaTransactionStopMixedSendsProbeTest {

  static final String LISTENER = "probe-f-kafka-tx-mixed-sends";

  @Tag("extended") // its own application, and up to a minute of waiting for message 3's record
  @Test
  void aListenerProducingForSomeMessagesAndCallingTheProviderForOthersSendsEachOnce()
      throws Exception {
    KafkaTransactionStopFixture.runMixedSends(
            "probe-f-mixed",
            MixedListeners.class,
            context -> context.getBean(MixedListener.class).calls(),
            Duration.ofSeconds(60),
            "fixmixed.copy=false")
        .assertEachSentOnce("");
  }

  @Tag("extended") // its own application, and up to a minute of waiting for message 2's record
  @Test
  void aListenerThatCopiesItsListBeforeProducingHasEachRecordCommittedOnce() throws Exception {
    String name = "fixmixed-copy";
    String topic = "idem." + name + "-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaTransactionStopFixture.start(
            name, topic, new SuiteProvider(), MixedListeners.class, "fixmixed.copy=true")) {
      MixedListener listener = application.context().getBean(MixedListener.class);
      RefusedOnce recoverer = application.context().getBean(RefusedOnce.class);
      String id = UUID.randomUUID().toString();
      String[] keys = {"tx-0-" + id, "bad-1-" + id, "tx-2-" + id};
      application.publishInOneBatch(keys);
      List<String> seen =
          KafkaTransactionStopFixture.awaitCommitted(
              application,
              topic + ".out",
              Duration.ofSeconds(60),
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
              + application.deadLettered().size();
      SoftAssertions.assertSoftly(
          softly -> {
            softly.assertThat(recoverer.calls()).as("recoveries (" + facts + ")").isGreaterThan(1);
            softly
                .assertThat(KafkaTransactionStopFixture.counts(seen, keys))
                .as("committed outbound records of each message (" + facts + ")")
                .containsExactly(1, 0, 1);
          });
    }
  }

  /** The listener ({@link KafkaTransactionStopFixture} adds its topic and error handler). */
  @Configuration(proxyBeanMethods = false)
  static class MixedListeners {
    @Bean
    MixedListener probeFMixedListener(
        KafkaTemplate<Object, Object> template,
        SuiteProvider provider,
        @Value("${suite.kafka.topic}") String topic,
        @Value("${fixmixed.copy}") boolean copy) {
      return new MixedListener(template, provider, topic + ".out", copy);
    }
  }

  /**
   * Sends each payload of its list in order: {@code tx-} produced to the outbound topic in the
   * container's transaction, {@code call-} to the provider, {@code bad-} always fails; reading each
   * from its list as it sends it, or from a copy of the list taken first ({@code copy}).
   */
  public static class MixedListener {
    private final KafkaTemplate<Object, Object> template;
    private final SuiteProvider provider;
    private final String outbound;
    private final boolean copy;
    private final AtomicInteger calls = new AtomicInteger();

    MixedListener(
        KafkaTemplate<Object, Object> template,
        SuiteProvider provider,
        String outbound,
        boolean copy) {
      this.template = template;
      this.provider = provider;
      this.outbound = outbound;
      this.copy = copy;
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
    public void batch(List<String> list) {
      calls.incrementAndGet();
      List<String> payloads = copy ? List.copyOf(list) : list;
      for (int i = 0; i < payloads.size(); i++) {
        KafkaTransactionStopFixture.sendMixed(template, provider, outbound, i, payloads.get(i));
      }
    }
  }
}
