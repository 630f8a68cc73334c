package dev.idempotency.examples.spring;

import dev.idempotency.examples.providers.FakeEmailProvider;
import dev.idempotency.examples.providers.FakeProvider.ProviderException;
import dev.idempotency.examples.worker.OrderShipped;
import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.stereotype.Component;

/**
 * Sends the "your order shipped" e-mail for each {@link OrderShipped} event on Kafka's {@code
 * order-shipped} topic, once per order, however often Kafka delivers the event: a producer that
 * publishes it twice, a redelivery after a rebalance, a retry after the provider failed. The key is
 * the order (one shipped e-mail per order); the provider gets the delivery's provider key, so that
 * the rare duplicate after a crash is absorbed there. Started with {@code
 * --notify.kafka.enabled=true --spring.kafka.bootstrap-servers=...}.
 */
@Component
public class OrderShippedMailer {

  private final FakeEmailProvider email;

  OrderShippedMailer(FakeEmailProvider email) {
    this.email = email;
  }

  /**
   * E-mails the customer that the order shipped.
   *
   * @param event the event
   * @throws ProviderException if the provider failed: the key is released and Kafka's error handler
   *     delivers the event again
   */
  @KafkaListener(
      id = "order-shipped-email",
      topics = "order-shipped",
      autoStartup = "${notify.kafka.enabled:false}")
  @IdempotentListener(name = "order-shipped-email", key = "#event.orderId", ttl = "PT72H")
  public void onOrderShipped(OrderShipped event) throws ProviderException {
    email.send(
        event.email(),
        "Your order " + event.orderId() + " shipped",
        "It is on its way.",
        IdempotentDelivery.context().providerKey());
  }
}
