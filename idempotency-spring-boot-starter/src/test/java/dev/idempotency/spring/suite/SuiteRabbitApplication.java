package dev.idempotency.spring.suite;

import dev.idempotency.spring.Idempotent;
import dev.idempotency.spring.messaging.Events;
import dev.idempotency.spring.messaging.IdempotentListener;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.ContainerCustomizer;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * The entry-point suite's RabbitMQ application, on the messaging tests' shared server ({@code
 * RabbitMqServer.shared()}): one {@code @RabbitListener} keyed by the {@code Idempotency-Key}
 * header, sending its payload through the {@link SuiteProvider}, with Boot's defaults (a failed
 * delivery is requeued); its queue dead-letters to {@code <queue>.dlq}, as the RabbitMQ messaging
 * test's queues do.
 */
@SpringBootConfiguration(proxyBeanMethods = false)
@EnableAutoConfiguration
@Import(SuiteBeans.class)
public class SuiteRabbitApplication {

  /** The listener's name, the operation of its keys. */
  static final String LISTENER = "suite-rabbit";

  /**
   * The {@code @Idempotent} listener method's name (property {@code
   * suite.rabbit.idempotent-method}).
   */
  static final String METHOD_LISTENER = "suite-rabbit-method";

  /**
   * Containers that stop within 100 ms (a consumer waits up to its receive timeout, 1 s by default,
   * before it sees a stop; {@code awaitAcknowledged} stops the container to check its queue).
   */
  @Bean
  ContainerCustomizer<SimpleMessageListenerContainer> quickStop() {
    return container -> container.setReceiveTimeout(100L);
  }

  @Bean
  Events events() {
    return new Events();
  }

  @Bean
  Declarables queues(@Value("${suite.destination}") String queue) {
    return new Declarables(
        QueueBuilder.nonDurable(queue)
            .deadLetterExchange("")
            .deadLetterRoutingKey(queue + ".dlq")
            .build(),
        new Queue(queue + ".dlq", false));
  }

  @Bean
  @ConditionalOnProperty(
      name = "suite.rabbit.idempotent-method",
      havingValue = "false",
      matchIfMissing = true)
  MessageListener messageListener(SuiteProvider provider) {
    return new MessageListener(provider);
  }

  @Bean
  @ConditionalOnProperty(name = "suite.rabbit.idempotent-method", havingValue = "true")
  IdempotentMethodListener idempotentMethodListener(SuiteProvider provider) {
    return new IdempotentMethodListener(provider);
  }

  /** The listener: the payload is what it sends, the header its key. */
  public static class MessageListener {
    private final SuiteProvider provider;

    MessageListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @RabbitListener(id = LISTENER, queues = "${suite.destination}")
    @IdempotentListener(name = LISTENER)
    public void receive(String payload) {
      provider.send(payload);
    }
  }

  /**
   * The listener as an {@code @Idempotent} listener method (property {@code
   * suite.rabbit.idempotent-method=true}), in the same container: the payload is its key.
   */
  public static class IdempotentMethodListener {
    private final SuiteProvider provider;

    IdempotentMethodListener(SuiteProvider provider) {
      this.provider = provider;
    }

    @RabbitListener(id = LISTENER, queues = "${suite.destination}")
    @Idempotent(name = METHOD_LISTENER, key = "#payload")
    public void receive(String payload) {
      provider.send(payload);
    }
  }
}
