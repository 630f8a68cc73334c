package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.ChildLifecycleProbe;
import dev.idempotency.testservers.RabbitMqServer;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.rabbit.annotation.EnableRabbit;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.NestedExceptionUtils;

/**
 * On a real RabbitMQ: a plain child context ({@code @EnableRabbit}, no auto-configuration) whose
 * {@code @Idempotent} {@code RabbitListener} uses the parent's container factory is refused as that
 * factory creates its container, before the child starts any lifecycle bean (its listener container
 * among them).
 */
class PlainChildRabbitListenerTest {

  static final String QUEUE = "idem.plain-child-rabbit";

  /** The parent: RabbitMQ, the starter, Boot's container factory and {@code @EnableRabbit}. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class ParentApp {
    @Bean
    Queue plainChildQueue() {
      return new Queue(QUEUE, false);
    }
  }

  static class PlainListener {
    @RabbitListener(queues = QUEUE)
    @Idempotent(name = "plain-child-rabbit", key = "#event")
    public void onEvent(String event) {}
  }

  @Configuration(proxyBeanMethods = false)
  @EnableRabbit
  static class PlainChildConfig {
    @Bean
    PlainListener plainListener() {
      return new PlainListener();
    }
  }

  @Test
  void aPlainChildsListenerOnTheParentsFactoryIsRefusedBeforeTheChildStartsAnyLifecycleBean() {
    try (ConfigurableApplicationContext parent =
        new SpringApplicationBuilder(ParentApp.class)
            .web(WebApplicationType.NONE)
            .run(
                "--spring.rabbitmq.host=127.0.0.1",
                "--spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
                "--idempotency.store=memory",
                "--spring.main.banner-mode=off")) {
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
              PlainListener.class.getName(), "@Idempotent ", "@ImportAutoConfiguration");
    }
  }
}
