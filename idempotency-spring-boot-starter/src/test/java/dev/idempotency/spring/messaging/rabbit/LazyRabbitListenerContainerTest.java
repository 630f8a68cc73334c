package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.testservers.RabbitMqServer;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.listener.MessageListenerContainer;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Lazy;
import org.springframework.core.NestedExceptionUtils;

/**
 * Regression (issue 37, SPEC 15), on a real RabbitMQ: {@code @Idempotent} on a
 * {@code @RabbitListener} under {@code MANUAL} acknowledgement fails the start ({@code
 * RabbitIdempotentMethodContainerTest}); the same listener on a {@code @Lazy} bean, created after
 * the application started (Spring AMQP then registers and starts its container at once), is refused
 * when the bean is created, and its container never runs.
 */
class LazyRabbitListenerContainerTest {

  static final String QUEUE = "idem.lazy.unsupported";
  static final String ID = "rabbit-lazy-manual-method";

  public static class ManualMethodListener {
    @RabbitListener(id = ID, queues = QUEUE, ackMode = "MANUAL")
    @Idempotent(name = ID, key = "#event")
    public void onEvent(String event) {}
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    Queue lazyQueue() {
      return new Queue(QUEUE, false);
    }

    @Bean
    @Lazy
    ManualMethodListener manualMethodListener() {
      return new ManualMethodListener();
    }
  }

  @Test
  void aLazyManualAcknowledgementListenerUnderIdempotentIsRefusedWhenCreated() {
    try (ConfigurableApplicationContext context =
        new SpringApplicationBuilder(App.class)
            .web(org.springframework.boot.WebApplicationType.NONE)
            .properties(
                "spring.rabbitmq.host=127.0.0.1",
                "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
                "idempotency.store=memory",
                "spring.main.banner-mode=off")
            .run()) {
      Throwable refusal = null;
      try {
        context.getBean(ManualMethodListener.class);
      } catch (RuntimeException e) {
        refusal = e; // refused when created: what the start does for an eager bean
      }
      MessageListenerContainer container =
          context.getBean(RabbitListenerEndpointRegistry.class).getListenerContainer(ID);
      assertThat(container == null || !container.isRunning())
          .as("the container of the refused listener does not run (%s)", container)
          .isTrue();
      assertThat(refusal).as("the lazy bean's creation is refused").isNotNull();
      assertThat(NestedExceptionUtils.getMostSpecificCause(refusal))
          .hasMessageContainingAll(
              "@Idempotent on " + ManualMethodListener.class.getName() + ".onEvent",
              "'" + ID + "'",
              "MANUAL acknowledgement, which is not supported");
    }
  }
}
