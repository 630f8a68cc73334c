package dev.idempotency.spring.suite;

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
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.springframework.beans.factory.annotation.Value;
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
 * KafkaTransactionStopSecondFactoryProbeTest}, {@link KafkaTransactionStopMixedSendsProbeTest}): an
 * application of its own whose listener container runs in a Kafka transaction, an outbound topic
 * read committed, and an error handler with no retries whose first dead letter the producer refuses
 * (over its {@code max.request.size}, which leaves the transaction unable to commit), the later
 * ones published.
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
