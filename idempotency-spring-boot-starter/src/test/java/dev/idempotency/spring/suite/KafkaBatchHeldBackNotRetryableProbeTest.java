package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.BatchDeliveryFailedException;
import dev.idempotency.spring.messaging.IdempotentListener;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.util.backoff.FixedBackOff;

/**
 * Probe (probeD, of commit 04d884e's held-back message): the backwards reader of {@link
 * KafkaBatchBackwardsPermanentFailureProbeTest}, with the application's error handler told that a
 * refusal for good is final, as an application says so to Spring Kafka: {@code notRetryable} (the
 * refusal's exception class added to the handler's not-retryable exceptions), or {@code noRetries}
 * (the handler's back-off gives no retry, {@code FixedBackOff(0, 0)}: straight to the dead-letter
 * topic). The promise (SPEC 1): every other message is sent, only the refused one is dead-lettered.
 *
 * <p>Found (high, a lost send: a message dead-lettered without ever being tried) on 04d884e, Boot
 * 3.5 and 4.0: the held-back hint only acted at the next delivery; the first failure was still
 * reported at the first unread message (message 0) with the listener's own failure, and a handler
 * with no retry for it recovered that message at once: message 0 was dead-lettered unsent ("dead-
 * lettered (listener calls: 3, sends of the four: [0, 1, 1, 0]) Expecting actual: [message 0,
 * refused 3] to contain exactly: [refused 3]"). Fixed (fixkafka2): that first failure comes back as
 * a deferral from message 0, which the handler neither counts nor recovers; messages 0 to 2 are
 * then sent, and message 3, alone, is dead-lettered by the handler.
 */
class KafkaBatchHeldBackNotRetryableProbeTest {

  static final String LISTENER = "probe-kafka-batch-held-back-final";

  @ParameterizedTest
  @ValueSource(strings = {"notRetryable", "noRetries"})
  void aBackwardsReaderRefusedForGoodWithNoRetryLeftSendsTheOthers(String handler)
      throws Exception {
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-held-back-final",
            3,
            "refused-",
            FinalRefusalListeners.class,
            FinalRefusalListener.class,
            FinalRefusalListener::calls,
            "probe.kafka.handler=" + handler)) {
      String[] keys = batch.keys;
      List<String> others = Arrays.asList(keys).subList(0, 3);
      batch.awaitOrGoOn(
          "the others sent and the refused message dead-lettered, or ten listener calls",
          () ->
              batch.calls() >= 10
                  || (others.stream().allMatch(key -> batch.provider.sends(key) >= 1)
                      && batch.application.deadLettered().contains(keys[3]))
                  || batch.application.deadLettered().size() >= 2);
      String facts = batch.facts();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            softly
                .assertThat(batch.application.deadLettered())
                .as("dead-lettered (" + facts + ")")
                .containsExactly(keys[3]);
            for (String key : others) {
              softly
                  .assertThat(batch.provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isEqualTo(1);
            }
          });
    }
  }

  /** The listener's refusal for good. */
  static class RefusedForGood extends RuntimeException {
    private static final long serialVersionUID = 1L;

    RefusedForGood() {
      super("the provider refused the message for good");
    }
  }

  /** The probe's listener, and the application's handler told that a refusal is final. */
  @Configuration(proxyBeanMethods = false)
  static class FinalRefusalListeners {
    @Bean
    FinalRefusalListener finalRefusalListener(SuiteProvider provider) {
      return new FinalRefusalListener(provider);
    }

    @Bean
    static BeanPostProcessor finalRefusals(org.springframework.core.env.Environment environment) {
      String handler = environment.getProperty("probe.kafka.handler", "notRetryable");
      return new BeanPostProcessor() {
        @Override
        public Object postProcessAfterInitialization(Object bean, String name) {
          if (bean instanceof DefaultErrorHandler errors) {
            if (handler.equals("noRetries")) {
              errors.setBackOffFunction((record, failure) -> new FixedBackOff(0, 0));
            } else {
              errors.addNotRetryableExceptions(RefusedForGood.class);
            }
          }
          return bean;
        }
      };
    }
  }

  /** Sends its list from the last message to the first; a payload "refused-..." always fails. */
  public static class FinalRefusalListener {
    private final SuiteProvider provider;
    private final AtomicInteger calls = new AtomicInteger();

    FinalRefusalListener(SuiteProvider provider) {
      this.provider = provider;
    }

    /** How often the listener ran. */
    public int calls() {
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
      for (int i = payloads.size() - 1; i >= 0; i--) {
        String payload = payloads.get(i);
        if (payload.startsWith("refused-")) {
          throw new BatchDeliveryFailedException(i, new RefusedForGood());
        }
        provider.send(payload);
      }
    }
  }
}
