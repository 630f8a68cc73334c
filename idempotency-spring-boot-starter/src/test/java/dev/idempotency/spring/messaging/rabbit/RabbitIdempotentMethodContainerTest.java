package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.testservers.RabbitMqServer;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.rabbit.annotation.RabbitHandler;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.core.NestedExceptionUtils;

/**
 * {@code @Idempotent} on a {@code @RabbitListener} method in a container the starter cannot support
 * safely fails the start, as an {@code IdempotentListener} does ({@code
 * RabbitManualAcknowledgementTest}), on a real RabbitMQ (issue 37): under {@code MANUAL}
 * acknowledgement a replay does not run the body, so nothing acknowledges; under a transacted
 * channel the outcome would be recorded before the channel's commit. The message names the
 * annotation, the method, the container and what to use instead.
 */
class RabbitIdempotentMethodContainerTest {

  static final String QUEUE = "idem.method.unsupported";

  public static class ManualMethodListener {
    @RabbitListener(id = "rabbit-method-manual-method", queues = QUEUE, ackMode = "MANUAL")
    @Idempotent(name = "rabbit-method-manual-method", key = "#event")
    public void onEvent(String event) {}
  }

  public static class MethodListener {
    @RabbitListener(id = "rabbit-method-method", queues = QUEUE)
    @Idempotent(name = "rabbit-method-method", key = "#event")
    public void onEvent(String event) {}
  }

  /** A class-level listener whose guarded method is its {@code @RabbitHandler}. */
  @RabbitListener(id = "rabbit-method-manual-class", queues = QUEUE, ackMode = "MANUAL")
  public static class ManualClassListener {
    @RabbitHandler
    @Idempotent(name = "rabbit-method-manual-class", key = "#event")
    public void onEvent(String event) {}
  }

  /**
   * A class-level listener whose handler is not guarded, beside a guarded public method that the
   * container never calls: nothing to refuse.
   */
  @RabbitListener(id = "rabbit-method-manual-helper", queues = QUEUE, ackMode = "MANUAL")
  public static class ManualClassListenerWithGuardedHelper {
    @RabbitHandler
    public void onEvent(String event) {}

    @Idempotent(name = "rabbit-method-helper", key = "#event")
    public void notAHandler(String event) {}
  }

  /** Every container's channel transacted, as an application's own factory may set it. */
  public static class TransactedChannels {
    @Bean
    org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory
        rabbitListenerContainerFactory(
            org.springframework.amqp.rabbit.connection.ConnectionFactory connections) {
      var factory =
          new org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory();
      factory.setConnectionFactory(connections);
      factory.setChannelTransacted(true);
      return factory;
    }
  }

  @SpringBootConfiguration(proxyBeanMethods = false)
  @EnableAutoConfiguration
  static class App {
    @Bean
    Queue methodQueue() {
      return new Queue(QUEUE, false);
    }
  }

  private static ConfigurableApplicationContext start(Class<?>... sources) {
    return new SpringApplicationBuilder(sources)
        .web(org.springframework.boot.WebApplicationType.NONE)
        .properties(
            "spring.rabbitmq.host=127.0.0.1",
            "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
            "idempotency.store=memory",
            "spring.main.banner-mode=off")
        .run();
  }

  private static void assertRefused(String[] messageParts, Class<?>... sources) {
    assertThatThrownBy(() -> start(sources).close())
        .satisfies(
            failure ->
                org.assertj.core.api.Assertions.assertThat(
                        NestedExceptionUtils.getMostSpecificCause(failure))
                    .isInstanceOf(IllegalStateException.class)
                    .message()
                    .contains(messageParts));
  }

  @Test
  void manualAcknowledgementUnderIdempotentOnARabbitListenerFailsTheStart() {
    assertRefused(
        new String[] {
          "@Idempotent on " + ManualMethodListener.class.getName() + ".onEvent(..)",
          "container 'rabbit-method-manual-method'",
          "MANUAL acknowledgement",
          "Use AUTO acknowledgement"
        },
        App.class,
        ManualMethodListener.class);
  }

  @Test
  void aTransactedChannelUnderIdempotentOnARabbitListenerFailsTheStart() {
    assertRefused(
        new String[] {
          "@Idempotent on " + MethodListener.class.getName() + ".onEvent(..)",
          "container 'rabbit-method-method'",
          "transacted channel",
          "Use a channel that is not transacted"
        },
        App.class,
        TransactedChannels.class,
        MethodListener.class);
  }

  @Test
  void manualAcknowledgementUnderIdempotentOnARabbitHandlerFailsTheStart() {
    assertRefused(
        new String[] {
          "@Idempotent on " + ManualClassListener.class.getName() + ".onEvent(..)",
          "container 'rabbit-method-manual-class'",
          "MANUAL acknowledgement"
        },
        App.class,
        ManualClassListener.class);
  }

  @Test
  void aClassLevelListenerWhoseHandlerIsNotGuardedStartsUnderManualAcknowledgement() {
    try (ConfigurableApplicationContext context =
        start(App.class, ManualClassListenerWithGuardedHelper.class)) {
      assertThat(context.isRunning()).as("the application started").isTrue();
    }
  }
}
