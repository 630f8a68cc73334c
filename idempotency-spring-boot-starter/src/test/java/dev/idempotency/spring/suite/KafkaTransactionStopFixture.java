package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.function.ToIntFunction;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.assertj.core.api.SoftAssertions;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.ConsumerRecordRecoverer;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.util.backoff.FixedBackOff;

/**
 * The set-up the probes of a Kafka batch's stop whose container transaction rolls back once share
 * ({@link KafkaTransactionStopRolledBackProduceProbeTest}, {@link
 * KafkaTransactionStopSecondFactoryProbeTest}, {@link KafkaTransactionStopMixedSendsProbeTest},
 * {@link KafkaTransactionStopReadAheadProbeTest}): an application of its own whose listener
 * container runs in a Kafka transaction, an outbound topic read committed, and an error handler
 * with no retries whose first dead letter the producer refuses (over its {@code max.request.size},
 * which leaves the transaction unable to commit), the later ones published.
 */
final class KafkaTransactionStopFixture {

  private KafkaTransactionStopFixture() {}

  /**
   * Starts an application on {@code topic} with the listener beans of {@code listeners}, the
   * outbound topic {@code topic + ".out"} and the refused-once dead letters ({@link
   * RefusedOnceDeadLetters}), in a Kafka container transaction of transaction id prefix {@code
   * name} and a random suffix.
   *
   * @param properties more application properties
   */
  static KafkaListenerApplication start(
      String name, String topic, SuiteProvider provider, Class<?> listeners, String... properties) {
    String[] all =
        Stream.concat(
                Stream.of(
                    // a refused dead letter is 5000 bytes; the messages and outbound records are
                    // short
                    "spring.kafka.producer.properties.max.request.size=2000",
                    "spring.kafka.producer.transaction-id-prefix=" + name + UUID.randomUUID(),
                    "spring.kafka.consumer.isolation-level=read-committed"),
                Arrays.stream(properties))
            .toArray(String[]::new);
    return KafkaListenerApplication.start(
        new SwitchableKeyStore(),
        provider,
        new CountDownLatch(1),
        topic,
        "none",
        new Class<?>[] {RefusedOnceDeadLetters.class, listeners},
        all);
  }

  /**
   * Runs the batch {@code [tx-0, call-1, bad-2, tx-3]} of mixed sends (a record produced in the
   * container's transaction for {@code tx-}, a provider call for {@code call-}, {@code bad-} always
   * failing) through an application {@link #start started} with the listener beans of {@code
   * listeners}, and waits up to {@code within} for message 3's record to be committed: the batch
   * went past the stop and its transaction committed (message 0's record, if it is produced again,
   * comes before it on the outbound topic's one partition).
   *
   * @param listenerCalls how many times the listener was called, from the application's context
   * @param properties more application properties
   */
  static MixedSends runMixedSends(
      String name,
      Class<?> listeners,
      ToIntFunction<ApplicationContext> listenerCalls,
      Duration within,
      String... properties)
      throws Exception {
    SuiteProvider provider = new SuiteProvider();
    String topic = "idem." + name + "-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        start(name, topic, provider, listeners, properties)) {
      RefusedOnce recoverer = application.context().getBean(RefusedOnce.class);
      String id = UUID.randomUUID().toString();
      String[] keys = {"tx-0-" + id, "call-1-" + id, "bad-2-" + id, "tx-3-" + id};
      application.publishInOneBatch(keys);
      List<String> seen =
          awaitCommitted(
              application,
              topic + ".out",
              within,
              "message 3 produced and committed",
              committed -> committed.contains(keys[3]));
      return new MixedSends(
          keys,
          seen,
          listenerCalls.applyAsInt(application.context()),
          recoverer.calls(),
          provider.sends(keys[1]),
          application.deadLettered().size());
    }
  }

  /**
   * What a run of {@link #runMixedSends} left: the committed outbound records ({@code seen}), the
   * listener's calls, the recoverer's, the provider sends of message 1, the dead letters published.
   */
  record MixedSends(
      String[] keys,
      List<String> seen,
      int listenerCalls,
      int recoveries,
      int providerSends,
      int deadLettered) {

    /** The committed outbound records of message {@code index}. */
    int committed(int index) {
      return Collections.frequency(seen, keys[index]);
    }

    /** What happened, for the assertions' descriptions, after {@code prefix}. */
    String facts(String prefix) {
      return prefix
          + "listener calls: "
          + listenerCalls
          + ", recoveries: "
          + recoveries
          + ", outbound committed: "
          + counts(seen, keys)
          + ", provider sends of message 1: "
          + providerSends
          + ", dead-lettered: "
          + deadLettered;
    }

    /**
     * Asserts the promise (SPEC 1, 15): the transaction rolled back at least once, message 0's
     * record committed once, message 1 sent to the provider once, message 2 never, message 3's
     * record committed once.
     */
    void assertEachSentOnce(String prefix) {
      assertSent(prefix, 1);
    }

    /**
     * As {@link #assertEachSentOnce}, but message 1 sent to the provider once or, at most, {@code
     * providerSendsAtMost} times (a second send the starter documents).
     */
    void assertSent(String prefix, int providerSendsAtMost) {
      String facts = facts(prefix);
      SoftAssertions.assertSoftly(
          softly -> {
            softly.assertThat(recoveries).as("recoveries (" + facts + ")").isGreaterThan(1);
            softly
                .assertThat(committed(0))
                .as("committed outbound records of message 0 (" + facts + ")")
                .isOne();
            softly
                .assertThat(providerSends)
                .as("provider sends of message 1 (" + facts + ")")
                .isBetween(1, providerSendsAtMost);
            softly
                .assertThat(committed(2))
                .as("committed outbound records of message 2 (" + facts + ")")
                .isZero();
            softly
                .assertThat(committed(3))
                .as("committed outbound records of message 3 (" + facts + ")")
                .isOne();
          });
    }
  }

  /**
   * Sends message {@code i}, {@code payload}, as a listener of mixed sends does: {@code tx-}
   * produced to {@code outbound} in the container's transaction, {@code call-} to the provider,
   * {@code bad-} always failing; a failure reported as {@link BatchDeliveryFailedException} at
   * {@code i}.
   */
  static void sendMixed(
      KafkaTemplate<Object, Object> template,
      SuiteProvider provider,
      String outbound,
      int i,
      String payload) {
    try {
      if (payload.startsWith("bad-")) {
        throw new IllegalStateException("the notification is refused for this recipient");
      }
      if (payload.startsWith("call-")) {
        provider.send(payload);
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

  /**
   * Waits up to {@code within} for the committed records of {@code outbound} to satisfy {@code
   * done}, and returns them then, or as they are when the time is up (the assertions say what
   * happened).
   */
  static List<String> awaitCommitted(
      KafkaListenerApplication application,
      String outbound,
      Duration within,
      String what,
      Predicate<List<String>> done)
      throws InterruptedException {
    try {
      Poll.within(within)
          .every(Duration.ofMillis(500))
          .until(what, () -> committed(application, outbound), done);
    } catch (AssertionError timedOut) {
      // the caller's assertions say what happened
    }
    return committed(application, outbound);
  }

  /** How many times each of {@code keys} is among {@code seen}, in order. */
  static List<Integer> counts(List<String> seen, String... keys) {
    return Arrays.stream(keys).map(key -> Collections.frequency(seen, key)).toList();
  }

  /** The values of {@code topic}'s committed records (the application's read-committed reader). */
  @SuppressWarnings("unchecked")
  static List<String> committed(KafkaListenerApplication application, String topic) {
    ConsumerFactory<String, String> consumers =
        application.context().getBean(ConsumerFactory.class);
    TopicPartition partition = new TopicPartition(topic, 0);
    List<String> values = new ArrayList<>();
    try (Consumer<String, String> consumer =
        consumers.createConsumer("tx-stop-out-reader-" + UUID.randomUUID(), null)) {
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      long end = consumer.endOffsets(List.of(partition)).get(partition);
      while (consumer.position(partition) < end) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
          values.add(record.value());
        }
      }
    }
    return values;
  }

  /**
   * The outbound topic, and an error handler (primary over the suite's) with {@link RefusedOnce}.
   */
  @Configuration(proxyBeanMethods = false)
  static class RefusedOnceDeadLetters {
    @Bean
    NewTopic txStopOutboundTopic(@Value("${suite.kafka.topic}") String topic) {
      return new NewTopic(topic + ".out", 1, (short) 1);
    }

    @Bean
    RefusedOnce txStopRefusedOnce(KafkaTemplate<Object, Object> template) {
      return new RefusedOnce(template);
    }

    @Bean
    @Primary
    CommonErrorHandler txStopRefusedOnceHandler(RefusedOnce recoverer) {
      return new DefaultErrorHandler(recoverer, new FixedBackOff(0, 0));
    }
  }

  /**
   * Dead-letters a record on the container's transactional template: the first one larger than the
   * producer's {@code max.request.size} (refused, the transaction left unable to commit), the later
   * ones as they are.
   */
  static class RefusedOnce implements ConsumerRecordRecoverer {
    private final KafkaTemplate<Object, Object> template;
    private final AtomicInteger calls = new AtomicInteger();

    RefusedOnce(KafkaTemplate<Object, Object> template) {
      this.template = template;
    }

    int calls() {
      return calls.get();
    }

    @Override
    public void accept(ConsumerRecord<?, ?> record, Exception failure) {
      String value =
          calls.getAndIncrement() == 0 ? "x".repeat(5000) : String.valueOf(record.value());
      try {
        template.send(record.topic() + ".DLT", 0, null, value).get(30, TimeUnit.SECONDS);
      } catch (Exception refused) {
        throw new IllegalStateException("the dead letter was not published", refused);
      }
    }
  }
}
