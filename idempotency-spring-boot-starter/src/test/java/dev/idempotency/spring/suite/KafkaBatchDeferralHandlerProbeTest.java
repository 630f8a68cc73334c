package dev.idempotency.spring.suite;

import dev.idempotency.spring.suite.KafkaBatchHeldBackThenSentProbeTest.OnceFailingListener;
import dev.idempotency.spring.suite.KafkaBatchHeldBackThenSentProbeTest.OnceFailingListeners;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.CommonLoggingErrorHandler;
import org.springframework.kafka.listener.DefaultErrorHandler;

/**
 * Probe (probeI, of fixkafka2's held-back deferrals): the backwards reader of {@link
 * KafkaBatchHeldBackThenSentProbeTest} (message 3 fails once at its first read) with an application
 * handler that does not seek after an error, which the starter's handler for deferrals copies
 * ({@code seeksAfterHandling()}): the suite's {@code DefaultErrorHandler} with {@code
 * setSeekAfterError(false)} (its retries from memory), or a handler that is not a {@code
 * DefaultErrorHandler}, Spring Kafka's {@code CommonLoggingErrorHandler}. Both deferrals (from
 * message 0, then of the held-back message 3) go to the starter's handler, never to the
 * application's. The promise (SPEC 1): each message is sent exactly once, none dead-lettered.
 */
class KafkaBatchDeferralHandlerProbeTest {

  /**
   * Found (high, lost sends: the whole batch committed unsent) on 705a819, Boot 3.5, both rows: the
   * listener ran once, nothing was sent, nothing dead-lettered, and the group's offset reached the
   * end of the topic: "sends of probe-deferral-handler-0-... (listener calls: 1, sends of the four:
   * [0, 0, 0, 0], dead-lettered: []) expected: 1 but was: 0". The container, told by the starter's
   * handler that it does not seek, calls its {@code handleBatchAndReturnRemaining}, which Spring
   * Kafka's {@code CommonDelegatingErrorHandler} does not override: the default calls {@code
   * handleBatch} and returns no records, so the deferral's handler (a {@code DefaultErrorHandler}
   * that does not seek either) hands back the batch's remaining records to nobody. Fixed: the
   * starter's handler passes {@code handleBatchAndReturnRemaining} on to the delegate it chooses.
   */
  @ParameterizedTest
  @ValueSource(strings = {"noSeek", "logging"})
  void aHeldBackMessageIsSentOnceWhateverTheApplicationsHandler(String handler) throws Exception {
    try (HeldBackBatch batch =
        HeldBackBatch.publish(
            "probe-deferral-handler",
            3,
            "flaky-",
            Handlers.class,
            OnceFailingListener.class,
            OnceFailingListener::calls,
            "probe.kafka.handler=" + handler)) {
      batch.awaitOrGoOn(
          "each message sent", () -> batch.sends().stream().allMatch(sends -> sends >= 1));
      batch.application.awaitAcknowledged();
      String facts = batch.facts();
      org.assertj.core.api.SoftAssertions.assertSoftly(
          softly -> {
            for (String key : batch.keys) {
              softly
                  .assertThat(batch.provider.sends(key))
                  .as("sends of " + key + " (" + facts + ")")
                  .isEqualTo(1);
            }
            softly.assertThat(batch.application.deadLettered()).as("dead-lettered").isEmpty();
          });
    }
  }

  /** The once-failing backwards reader, and the application's handler as the probe sets it. */
  @Configuration(proxyBeanMethods = false)
  @Import(OnceFailingListeners.class)
  static class Handlers {
    @Bean
    static BeanPostProcessor probeHandler(org.springframework.core.env.Environment environment) {
      String handler = environment.getProperty("probe.kafka.handler", "noSeek");
      return new BeanPostProcessor() {
        @Override
        public Object postProcessAfterInitialization(Object bean, String name) {
          if (bean instanceof DefaultErrorHandler errors && name.equals("errorHandler")) {
            if (handler.equals("logging")) {
              CommonErrorHandler logging = new CommonLoggingErrorHandler();
              return logging;
            }
            errors.setSeekAfterError(false);
          }
          return bean;
        }
      };
    }
  }
}
