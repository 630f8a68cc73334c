package dev.idempotency.spring.messaging.rabbit;

import dev.idempotency.spring.messaging.ListenerTestConfiguration;
import dev.idempotency.testservers.RabbitMqServer;
import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * The shared rabbitmq-server's address and the listener tests' properties, for a test's context.
 */
final class RabbitTestProperties {

  private RabbitTestProperties() {}

  static void register(DynamicPropertyRegistry registry) {
    registry.add("spring.rabbitmq.host", () -> "127.0.0.1");
    registry.add("spring.rabbitmq.port", () -> RabbitMqServer.shared().port());
    for (String property : ListenerTestConfiguration.PROPERTIES) {
      int equals = property.indexOf('=');
      registry.add(property.substring(0, equals), () -> property.substring(equals + 1));
    }
  }
}
