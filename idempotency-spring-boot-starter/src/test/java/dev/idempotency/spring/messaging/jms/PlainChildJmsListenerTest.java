package dev.idempotency.spring.messaging.jms;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.autoconfigure.IdempotencyAutoConfiguration;
import dev.idempotency.spring.autoconfigure.IdempotencyMessagingAutoConfiguration;
import dev.idempotency.spring.messaging.ChildLifecycleProbe;
import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.testservers.Poll;
import jakarta.jms.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.jms.annotation.EnableJms;
import org.springframework.jms.annotation.JmsListener;
import org.springframework.jms.core.JmsTemplate;

/**
 * On a real embedded ActiveMQ Artemis broker: a plain child context (a Spring Cloud named context:
 * {@code @EnableJms}, no auto-configuration) whose {@code @IdempotentListener} {@code JmsListener}
 * uses the parent's container factory is refused as that factory creates its container, before the
 * child starts any lifecycle bean (its listener container among them), with a backlog waiting on
 * the queue; the same child importing the starter's auto-configuration handles one key once on the
 * parent's factory.
 */
class PlainChildJmsListenerTest {

  static final List<String> HANDLED = new CopyOnWriteArrayList<>();

  static ConfigurableApplicationContext parent;

  /** The parent: the broker, Boot's container factory and {@code @EnableJms}, the starter. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class ParentApp {}

  static class PlainListener {
    @JmsListener(destination = "idem.plain.refused") // on the parent's jmsListenerContainerFactory
    @IdempotentListener(name = "plain-child-events", key = "#event")
    public void onEvent(String event) {
      HANDLED.add(event);
    }
  }

  static class GuardedListener {
    @JmsListener(destination = "idem.plain.guarded")
    @IdempotentListener(name = "guarded-child-events", key = "#event")
    public void onEvent(String event) {
      HANDLED.add(event);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableJms
  static class PlainChildConfig {
    @Bean
    PlainListener plainListener() {
      return new PlainListener();
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableJms
  @ImportAutoConfiguration({
    IdempotencyAutoConfiguration.class,
    IdempotencyMessagingAutoConfiguration.class
  })
  static class GuardedChildConfig {
    @Bean
    GuardedListener guardedListener() {
      return new GuardedListener();
    }
  }

  @BeforeAll
  static void startParent() {
    parent =
        new SpringApplicationBuilder(ParentApp.class)
            .web(WebApplicationType.NONE)
            .run(
                "--spring.artemis.mode=embedded",
                "--spring.artemis.embedded.enabled=true",
                "--spring.artemis.embedded.queues=idem.plain.refused,idem.plain.guarded",
                "--spring.jms.listener.receive-timeout=100ms",
                "--idempotency.store=memory",
                "--spring.main.banner-mode=off");
  }

  @AfterAll
  static void closeParent() {
    if (parent != null) {
      parent.close();
    }
  }

  @BeforeEach
  void clear() {
    HANDLED.clear();
  }

  @Test
  void aPlainChildsListenerOnTheParentsFactoryIsRefusedBeforeTheChildStartsAnyLifecycleBean() {
    JmsTemplate template = new JmsTemplate(parent.getBean(ConnectionFactory.class));
    template.convertAndSend("idem.plain.refused", "k1");
    template.convertAndSend("idem.plain.refused", "k1"); // a redelivery of one event, waiting
    ChildLifecycleProbe lifecycle = new ChildLifecycleProbe();
    Throwable refusal = null;
    try (AnnotationConfigApplicationContext child = new AnnotationConfigApplicationContext()) {
      child.setParent(parent);
      child.register(PlainChildConfig.class);
      child.getBeanFactory().registerSingleton("lifecycleProbe", lifecycle);
      child.refresh();
    } catch (RuntimeException e) {
      refusal = e;
    }
    assertThat(refusal).as("the plain child's refresh").isNotNull();
    assertThat(lifecycle.started())
        .as("a lifecycle bean of the child started before the refusal (%s)", refusal)
        .isFalse();
    assertThat(NestedExceptionUtils.getMostSpecificCause(refusal))
        .hasMessageContainingAll(
            PlainListener.class.getName(), "@IdempotentListener", "@ImportAutoConfiguration");
    assertThat(HANDLED).isEmpty();
  }

  @Test
  void aPlainChildThatImportsTheAutoConfigurationHandlesOneKeyOnceOnTheParentsFactory()
      throws InterruptedException {
    try (AnnotationConfigApplicationContext child = new AnnotationConfigApplicationContext()) {
      child.setParent(parent);
      child.register(GuardedChildConfig.class);
      child.refresh();
      JmsTemplate template = new JmsTemplate(parent.getBean(ConnectionFactory.class));
      template.convertAndSend("idem.plain.guarded", "k1");
      template.convertAndSend("idem.plain.guarded", "k1"); // a redelivery of one event
      template.convertAndSend("idem.plain.guarded", "k2"); // handled after both k1 (one consumer)
      Poll.within(Duration.ofSeconds(30)).until("k2 handled", () -> HANDLED.contains("k2"));
      assertThat(HANDLED).containsExactly("k1", "k2");
    }
  }
}
