package dev.idempotency.spring.messaging.rabbit;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.spring.messaging.IdempotentListener;
import dev.idempotency.testservers.RabbitMqServer;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.core.NestedExceptionUtils;

/**
 * RabbitMQ's {@code MANUAL} acknowledgement is not supported (a replay does not run the listener,
 * which would have acknowledged it): an application that sets it on an {@link IdempotentListener}
 * fails at startup, whether on the listener or for every container; other listeners may keep it.
 * Nor is a transacted channel (the channel's commit comes after the outcome was recorded, with
 * nothing the starter can wait on): it fails the start too.
 */
class RabbitManualAcknowledgementTest {

  static final String QUEUE = "idem.manual";

  public static class ManualListener {
    @RabbitListener(id = "rabbit-manual", queues = QUEUE, ackMode = "MANUAL")
    @IdempotentListener(key = "#event")
    public void onEvent(String event) {}
  }

  public static class PlainManualListener {
    @RabbitListener(id = "rabbit-plain-manual", queues = QUEUE, ackMode = "MANUAL")
    public void onEvent(String event) {}
  }

  public static class AutoListener {
    @RabbitListener(id = "rabbit-auto", queues = QUEUE)
    @IdempotentListener(key = "#event")
    public void onEvent(String event) {}
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
    Queue manualQueue() {
      return new Queue(QUEUE, false);
    }
  }

  private static ConfigurableApplicationContext start(Class<?> listener, String... properties) {
    return start(new Class<?>[] {App.class, listener}, properties);
  }

  private static ConfigurableApplicationContext start(Class<?>[] sources, String... properties) {
    return new SpringApplicationBuilder(sources)
        .web(org.springframework.boot.WebApplicationType.NONE)
        .properties(
            "spring.rabbitmq.host=127.0.0.1",
            "spring.rabbitmq.port=" + RabbitMqServer.shared().port(),
            "idempotency.store=memory",
            "spring.main.banner-mode=off")
        .properties(properties)
        .run();
  }

  @Test
  void manualAcknowledgementOnAnIdempotentListenerFailsTheStart() {
    assertThatThrownBy(() -> start(ManualListener.class).close())
        .satisfies(
            failure ->
                org.assertj.core.api.Assertions.assertThat(
                        NestedExceptionUtils.getMostSpecificCause(failure))
                    .hasMessageContainingAll(
                        "@IdempotentListener on " + ManualListener.class.getName() + ".onEvent",
                        "'rabbit-manual'",
                        "MANUAL acknowledgement, which is not supported",
                        "Use AUTO acknowledgement"));
  }

  @Test
  void manualAcknowledgementForEveryContainerFailsTheStartOfAnIdempotentListener() {
    assertThatThrownBy(
            () ->
                start(AutoListener.class, "spring.rabbitmq.listener.simple.acknowledge-mode=manual")
                    .close())
        .satisfies(
            failure ->
                org.assertj.core.api.Assertions.assertThat(
                        NestedExceptionUtils.getMostSpecificCause(failure))
                    .hasMessageContaining("MANUAL acknowledgement, which is not supported"));
  }

  @Test
  void aTransactedChannelUnderAnIdempotentListenerFailsTheStart() {
    assertThatThrownBy(
            () ->
                start(new Class<?>[] {App.class, TransactedChannels.class, AutoListener.class})
                    .close())
        .satisfies(
            failure ->
                org.assertj.core.api.Assertions.assertThat(
                        NestedExceptionUtils.getMostSpecificCause(failure))
                    .hasMessageContainingAll(
                        "@IdempotentListener on " + AutoListener.class.getName() + ".onEvent",
                        "'rabbit-auto'",
                        "transacted channel",
                        "not supported"));
  }

  @Test
  void manualAcknowledgementOfAnotherListenerStarts() {
    start(PlainManualListener.class).close();
  }
}
