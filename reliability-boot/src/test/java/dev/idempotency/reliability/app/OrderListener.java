package dev.idempotency.reliability.app;

import dev.idempotency.spring.messaging.IdempotentDelivery;
import dev.idempotency.spring.messaging.IdempotentListener;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.stereotype.Component;

/**
 * A Kafka consumer of topic {@code e2e.orders} that sends one notification per record, keyed by the
 * record's {@code Idempotency-Key} header (the listener's default), through {@link ProviderClient}.
 * Present with {@code --e2e.kafka.enabled=true}.
 */
@Component
@ConditionalOnProperty("e2e.kafka.enabled")
public class OrderListener {

  /** The topic. */
  public static final String TOPIC = "e2e.orders";

  /** The listener's id, also its consumer group. */
  public static final String ID = "e2e-orders";

  private final ProviderClient provider;

  OrderListener(ProviderClient provider) {
    this.provider = provider;
  }

  /**
   * Sends the record's notification.
   *
   * @param key the record's value: the run's key, the same as its header
   */
  @KafkaListener(id = ID, topics = TOPIC)
  @IdempotentListener(name = ID, ttl = "PT1H")
  public void onOrder(String key) {
    provider.send(key, IdempotentDelivery.context());
  }
}
