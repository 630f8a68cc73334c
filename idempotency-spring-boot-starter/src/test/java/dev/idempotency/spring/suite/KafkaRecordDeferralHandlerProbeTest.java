package dev.idempotency.spring.suite;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.SwitchableKeyStore;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.CommonLoggingErrorHandler;
import org.springframework.kafka.listener.DefaultErrorHandler;

/**
 * Probe (probeI): the suite's Kafka record listener with an application handler that does not seek
 * after an error ({@code DefaultErrorHandler.setSeekAfterError(false)}, or Spring Kafka's {@code
 * CommonLoggingErrorHandler}), which the starter's handler for deferrals copies; the container then
 * retries a failed record from memory ({@code handleOne}). The store is down when the message
 * comes, then answers again. The promise (SPEC 1): the message is sent once, never skipped.
 */
class KafkaRecordDeferralHandlerProbeTest {

  @ParameterizedTest
  @ValueSource(strings = {"noSeek", "logging"})
  void aDeferredRecordIsSentOnceWhateverTheApplicationsHandler(String handler) throws Exception {
    SwitchableKeyStore store = new SwitchableKeyStore();
    SuiteProvider provider = new SuiteProvider();
    store.down.set(true);
    try (KafkaListenerApplication application =
        KafkaListenerApplication.start(
            store,
            provider,
            new CountDownLatch(1),
            "idem.probe-record-deferral-handler-" + UUID.randomUUID(),
            "false",
            new Class<?>[] {Handlers.class},
            "probe.kafka.handler=" + handler)) {
      String key = "probe-record-deferral-" + UUID.randomUUID();
      application.publish(key, key);
      Waits.await("the store refused twice", () -> store.refused.get() >= 2);
      store.down.set(false);
      try {
        Waits.await("the message sent", () -> provider.sends(key) >= 1);
      } catch (AssertionError timedOut) {
        // the assertion says what happened
      }
      application.awaitAcknowledged();
      assertThat(provider.sends(key))
          .as("sends of the message (store refusals: " + store.refused.get() + ")")
          .isEqualTo(1);
    }
  }

  /** The application's handler as the probe sets it. */
  @Configuration(proxyBeanMethods = false)
  static class Handlers {
    @Bean
    static BeanPostProcessor probeRecordHandler(
        org.springframework.core.env.Environment environment) {
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
