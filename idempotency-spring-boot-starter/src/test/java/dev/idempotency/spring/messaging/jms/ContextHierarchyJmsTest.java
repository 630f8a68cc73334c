package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.IdempotentListener;
import jakarta.jms.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.jms.annotation.EnableJms;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.config.DefaultJmsListenerContainerFactory;
import org.springframework.jms.core.JmsTemplate;

/**
 * On a real embedded ActiveMQ Artemis broker (issue 37): an {@code @IdempotentListener} {@code
 * JmsListener} of a child context built with {@code SpringApplicationBuilder.child}, on its own
 * listener container factory and the parent's broker and guard, handles a redelivered message once.
 */
class ContextHierarchyJmsTest {

  static final List<String> HANDLED = new CopyOnWriteArrayList<>();

  /** The parent: the broker, the starter, the guard. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class ParentApp {}

  /** The child: its own listeners and container factory, with the starter's auto-configuration. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  @EnableJms // Boot's own @EnableJms backs off when the parent has one
  static class ChildApp {
    @Bean
    DefaultJmsListenerContainerFactory childFactory(ConnectionFactory connectionFactory) {
      DefaultJmsListenerContainerFactory factory = new DefaultJmsListenerContainerFactory();
      factory.setConnectionFactory(connectionFactory);
      factory.setSessionTransacted(true); // as Boot's; one consumer, so deliveries stay in order
      factory.setReceiveTimeout(100L); // stops in a tenth of Boot's default second
      return factory;
    }

    @Bean
    ChildListener childListener() {
      return new ChildListener();
    }
  }

  static class ChildListener {
    @JmsListener(destination = "idem.child", containerFactory = "childFactory")
    @IdempotentListener(name = "child-events", key = "#event")
    public void onEvent(String event) {
      HANDLED.add(event);
    }
  }

  @Test
  void aChildsListenerHandlesOneKeyOnce() throws InterruptedException {
    ConfigurableApplicationContext child =
        new SpringApplicationBuilder(ParentApp.class)
            .web(WebApplicationType.NONE)
            .child(ChildApp.class)
            .web(WebApplicationType.NONE)
            // arguments, for parent and child, over the test application.properties (no broker)
            .run(
                "--spring.artemis.mode=embedded",
                "--spring.artemis.embedded.enabled=true",
                "--spring.artemis.embedded.queues=idem.child",
                "--idempotency.store=memory",
                "--spring.main.banner-mode=off");
    ConfigurableApplicationContext parent = (ConfigurableApplicationContext) child.getParent();
    try (parent;
        child) {
      JmsTemplate template = new JmsTemplate(parent.getBean(ConnectionFactory.class));
      template.convertAndSend("idem.child", "k1");
      template.convertAndSend("idem.child", "k1"); // a redelivery of one event
      template.convertAndSend("idem.child", "k2"); // handled after both k1 (one consumer)
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (!HANDLED.contains("k2") && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertThat(HANDLED).containsExactly("k1", "k2");
    }
  }
}
