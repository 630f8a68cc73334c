package dev.idempotency.spring.messaging.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.messaging.ChildLifecycleProbe;
import dev.idempotency.spring.messaging.EmbeddedKafka;
import dev.idempotency.spring.messaging.IdempotentListener;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;

/**
 * On the shared in-JVM Kafka broker: a plain child context ({@code @EnableKafka}, no
 * auto-configuration) whose {@code @IdempotentListener} {@code KafkaListener} uses the parent's
 * container factory is refused as that factory creates its container, before the child starts any
 * lifecycle bean (its listener container among them). The guarded case, a child built with {@code
 * SpringApplicationBuilder.child} on the parent's factory, is ContextHierarchyKafkaProbeTest.
 */
class PlainChildKafkaListenerTest {

  /** The parent: Kafka, the starter, Boot's container factory and {@code @EnableKafka}. */
  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class ParentApp {}

  static class PlainListener {
    @KafkaListener(id = "plain-child-kafka", topics = "idem.plain-child-kafka")
    @IdempotentListener(name = "plain-child-kafka", key = "#event")
    public void onEvent(String event) {}
  }

  @Configuration(proxyBeanMethods = false)
  @EnableKafka
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
                "--spring.kafka.bootstrap-servers=" + EmbeddedKafka.bootstrapServers(),
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
              PlainListener.class.getName(), "@IdempotentListener", "@ImportAutoConfiguration");
    }
  }
}
