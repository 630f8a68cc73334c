package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import jakarta.jms.ConnectionFactory;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.jms.config.DefaultJmsListenerContainerFactory;

/**
 * On a real embedded ActiveMQ Artemis broker: a listener container factory of a final class cannot
 * be advised to hook the containers it creates after the start; the application still starts, with
 * the factory left as it is (and a warning).
 */
class FinalJmsListenerContainerFactoryTest {

  /** The application's own factory, of a final class. */
  static final class FinalFactory extends DefaultJmsListenerContainerFactory {}

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    FinalFactory jmsListenerContainerFactory(ConnectionFactory connectionFactory) {
      FinalFactory factory = new FinalFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setSessionTransacted(true);
      return factory;
    }
  }

  @Test
  void aFinalFactoryIsLeftAsItIsAndTheApplicationStarts() {
    try (ConfigurableApplicationContext context =
        new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties(
                "spring.artemis.mode=embedded",
                "spring.artemis.embedded.enabled=true",
                "idempotency.store=memory",
                "spring.main.banner-mode=off")
            .run()) {
      assertThat(context.getBean("jmsListenerContainerFactory"))
          .isExactlyInstanceOf(FinalFactory.class);
    }
  }
}
