package dev.idempotency.spring.suite;

import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentListener;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.config.AbstractJmsListenerContainerFactory;
import org.springframework.jms.listener.adapter.ListenerExecutionFailedException;

/**
 * The entry-point suite's JMS application: one {@code @JmsListener} keyed by the {@code
 * Idempotency-Key} header (the {@code Idempotency_Key} property), sending its payload through the
 * {@link SuiteProvider}, on the Artemis broker Spring Boot embeds with its defaults (transacted
 * sessions, ten delivery attempts, then {@code DLQ}), as the JMS messaging test's application.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
@Import(SuiteBeans.class)
public class SuiteJmsApplication {

  /** The listener's name, the operation of its keys. */
  static final String LISTENER = "suite-jms";

  @Bean
  Events events() {
    return new Events();
  }

  @Bean
  ConsumerFailures consumerFailures() {
    return new ConsumerFailures();
  }

  /**
   * Gives every JMS listener container factory an error handler that notes the container's own
   * failures in {@link ConsumerFailures} (a commit or acknowledgement that threw after the listener
   * returned), not the listener's ({@link ListenerExecutionFailedException}).
   */
  @Bean
  static BeanPostProcessor containerFailures(ObjectProvider<ConsumerFailures> failures) {
    return new BeanPostProcessor() {
      @Override
      public Object postProcessAfterInitialization(Object bean, String beanName) {
        if (bean instanceof AbstractJmsListenerContainerFactory<?> factory) {
          factory.setErrorHandler(
              failure -> {
                if (!(failure instanceof ListenerExecutionFailedException)) {
                  failures.getObject().add(String.valueOf(failure));
                }
              });
        }
        return bean;
      }
    };
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
