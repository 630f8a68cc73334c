package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.spring.messaging.SwitchableKeyStore;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.jms.annotation.JmsListener;

/**
 * The entry-point suite's JMS application: one {@code @JmsListener} keyed by the {@code
 * Idempotency-Key} header (the {@code Idempotency_Key} property), sending its payload through the
 * {@link SuiteProvider}, on the Artemis broker Spring Boot embeds with its defaults (transacted
 * sessions, ten delivery attempts, then {@code DLQ}), as the JMS messaging test's application.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
public class SuiteJmsApplication {

  /** The listener's name, the operation of its keys. */
  static final String LISTENER = "suite-jms";

  /** The store, unless the test registered one that outlives the application (a restart). */
  @Bean
  @ConditionalOnMissingBean
  SwitchableKeyStore switchableKeyStore() {
    return new SwitchableKeyStore();
  }

  /** The provider, unless the test registered one that outlives the application. */
  @Bean
  @ConditionalOnMissingBean
  SuiteProvider suiteProvider() {
    return new SuiteProvider();
  }

  @Bean
  Events events() {
    return new Events();
  }

  @Bean
  MessageListener messageListener(SuiteProvider provider) {
    return new MessageListener(provider);
  }

  /** The listener: the payload is what it sends, the header its key. */
  public static class MessageListener {
    private final SuiteProvider provider;

    MessageListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @JmsListener(id = LISTENER, destination = "${suite.destination}")
    @IdempotentListener(name = LISTENER)
    public void receive(String payload) {
      provider.send(payload);
    }
  }
}
