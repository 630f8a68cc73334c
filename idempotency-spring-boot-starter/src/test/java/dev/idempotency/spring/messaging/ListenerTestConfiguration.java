package dev.idempotency.spring.messaging;

import dev.idempotency.FailureClassifier;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;

/** What every broker's test application has: the provider, the events, the store, a classifier. */
@TestConfiguration(proxyBeanMethods = false)
public class ListenerTestConfiguration {

  @Bean
  Sends sends() {
    return new Sends();
  }

  @Bean
  Events events() {
    return new Events();
  }

  @Bean
  SwitchableKeyStore switchableKeyStore() {
    return new SwitchableKeyStore();
  }

  @Bean
  FailureClassifier permanentFailures() {
    return failure -> failure instanceof Sends.PermanentFailure;
  }

  /** The settings of every broker's test: short waits and backoff, so that deferrals are quick. */
  public static final String[] PROPERTIES = {
    "idempotency.in-flight-wait=50ms",
    "idempotency.messaging.back-off.initial=50ms",
    "idempotency.messaging.back-off.max=300ms",
    "spring.main.banner-mode=off"
  };
}
