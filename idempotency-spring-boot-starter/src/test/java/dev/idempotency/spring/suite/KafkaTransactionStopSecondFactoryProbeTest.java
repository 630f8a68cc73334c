package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.suite.KafkaTransactionStopFixture.RefusedOnce;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;

/**
 * Probe (probeF, of fixtxprod ba364c18): as {@link KafkaTransactionStopRolledBackProduceProbeTest},
 * a Kafka batch listener in its container's Kafka transaction stops at message 1 of {@code [0,
 * bad-1, 2]} and the first dead letter is refused (the container's transaction rolls back once),
 * but the listener produces its outbound records through a {@code KafkaTemplate} of a second
 * producer factory of its own (an application's producer for its outbound topic, built apart from
 * Spring Boot's), not the producer of the container's transaction. Those records are committed
 * whatever the container's transaction does, so message 0 must be recorded and its redelivery a
 * replay: its record committed once, not twice (SPEC 1, 15); message 2's once, message 1's never.
 *
 * <ul>
 *   <li>The second factory is not transactional.
 *   <li>The second factory is transactional (its own {@code transactionIdPrefix}) and its template
 *       allows non-transactional sends: outside a transaction of its own factory it sends through a
 *       non-transactional producer.
 *   <li>Spring Boot's factory, the container's, through a template of the listener's own with a
 *       {@code transactionIdPrefix} of its own: inside the container's transaction it sends through
 *       that transaction's producer (bound to the factory), so the abort discards message 0's
 *       record and message 0 must be released and produced again, once, as in {@link
 *       KafkaTransactionStopRolledBackProduceProbeTest}.
 * </ul>
 *
 * <p>Tried first (probeF, on 602496eb, Boot 3.5): a transactional second factory whose template
 * does not allow non-transactional sends. It cannot take part in the container's transaction:
 * Spring Kafka's {@code KafkaTransactionManager} runs with {@code SYNCHRONIZATION_NEVER}, so the
 * template found no transaction and refused every send ("No transaction is in process"), and the
 * listener failed at message 0 (dead-lettered, nothing produced): a failure the application sees,
 * not a send the starter can lose or repeat. So no case of it here.
 */
class KafkaTransactionStopSecondFactoryProbeTest {

  static final String LISTENER = "probe-f-kafka-tx-second-factory";

  @Tag("extended") // its own application, and up to a minute of waiting for the records
  @Test
  void aNonTransactionalSecondFactorysRecordsAreCommittedOnce() throws Exception {
    probe("probe-f-second-factory", "second");
  }

  @Tag("extended") // its own application, and up to a minute of waiting for the records
  @Test
  void aTransactionalSecondFactoryAllowingNonTransactionalSendsHasItsRecordsCommittedOnce()
      throws Exception {
    probe("probe-f-second-tx-factory", "second-tx");
  }

  @Tag("extended") // its own application, and up to a minute of waiting for the records
  @Test
  void aTemplateWithATransactionIdPrefixOfItsOwnHasItsRecordsCommittedOnce() throws Exception {
    probe("probe-f-own-prefix", "own-prefix");
  }

  /**
   * Publishes {@code [0, bad-1, 2]} in one batch to a {@link SecondFactoryListener} whose factory
   * template is the {@code template} kind, and checks what was committed on the outbound topic.
   */
  private static void probe(String name, String template) throws Exception {
    String topic = "idem." + name + "-" + UUID.randomUUID();
    try (KafkaListenerApplication application =
        KafkaTransactionStopFixture.start(
            name,
            topic,
            new SuiteProvider(),
            SecondFactoryListeners.class,
            "probe-f.template=" + template)) {
      SecondFactoryListener listener = application.context().getBean(SecondFactoryListener.class);
      RefusedOnce recoverer = application.context().getBean(RefusedOnce.class);
      String[] keys = new String[3];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = (i == 1 ? "bad-" : "") + name + "-" + i + "-" + UUID.randomUUID();
      }
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
  static class SecondFactoryListeners {
    /**
     * The second factory is not a bean (one would replace Spring Boot's), as an application's
     * producer for another purpose built inside the bean that uses it.
     */
    @Bean
    SecondFactoryListener probeFSecondFactoryListener(
        ProducerFactory<Object, Object> bootFactory,
        @Value("${suite.kafka.topic}") String topic,
        @Value("${probe-f.template}") String kind) {
      if (kind.equals("own-prefix")) {
        KafkaTemplate<Object, Object> own = new KafkaTemplate<>(bootFactory);
        own.setTransactionIdPrefix("probe-f-own-" + UUID.randomUUID());
        return new SecondFactoryListener(own, null, topic + ".out");
      }
      Map<String, Object> configs = new HashMap<>(bootFactory.getConfigurationProperties());
      DefaultKafkaProducerFactory<Object, Object> second =
          new DefaultKafkaProducerFactory<>(configs);
      if (kind.equals("second-tx")) {
        second.setTransactionIdPrefix("probe-f-outbound-" + UUID.randomUUID());
      }
      KafkaTemplate<Object, Object> template = new KafkaTemplate<>(second);
      template.setAllowNonTransactional(true);
      return new SecondFactoryListener(template, second, topic + ".out");
    }
  }

  /**
   * Produces each payload of its list, in order, to the outbound topic through a template of its
   * own (of a second factory, non-transactional sends allowed; or of Spring Boot's factory, with a
   * transaction id prefix of its own); one that starts with {@code bad-} always fails.
   */
  public static class SecondFactoryListener implements DisposableBean {
    private final @Nullable DefaultKafkaProducerFactory<Object, Object> factory;
    private final KafkaTemplate<Object, Object> template;
    private final String outbound;
    private final AtomicInteger calls = new AtomicInteger();

    SecondFactoryListener(
        KafkaTemplate<Object, Object> template,
        @Nullable DefaultKafkaProducerFactory<Object, Object> factory,
        String outbound) {
      this.factory = factory;
      this.template = template;
      this.outbound = outbound;
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
          template.send(outbound, 0, null, payload).get(30, TimeUnit.SECONDS);
        } catch (RuntimeException failure) {
          throw new BatchDeliveryFailedException(i, failure);
        } catch (Exception interruptedOrFailed) {
          throw new BatchDeliveryFailedException(
              i, new IllegalStateException("not produced", interruptedOrFailed));
        }
      }
    }

    @Override
    public void destroy() {
      if (factory != null) {
        factory.destroy();
      }
    }
  }
}
