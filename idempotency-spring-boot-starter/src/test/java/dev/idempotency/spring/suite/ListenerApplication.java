package dev.idempotency.spring.suite;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.spring.messaging.Events;
import java.util.List;

/** A running application of a {@link ListenerEntryPoint}, as its broker's client sees it. */
public interface ListenerApplication extends AutoCloseable {

  /** Publishes {@code payload} to the listener with {@code key} in its Idempotency-Key header. */
  void publish(String key, String payload) throws Exception;

  /** The payloads of the listener's dead-letter destination, in order. */
  List<String> deadLettered();

  /** Waits (bounded) until nothing of the listener's destination is left unacknowledged. */
  void awaitAcknowledged() throws Exception;

  /**
   * The container's consumer's own failures outside any listener call (a Kafka poll or commit that
   * threw; a JMS commit or acknowledgement after the listener returned, as the container's error
   * handler sees it), as {@link ConsumerFailures#seen()} gives them; empty where none were seen, or
   * where the application does not note them (RabbitMQ).
   */
  default List<String> consumerFailures() {
    return List.of();
  }

  /** The guard's events in this application. */
  Events events();

  /**
   * The application's guard: called with a listener's key (its name and the message's key, as
   * {@code IdempotencyKey.of}), it stands for another instance of the listener consuming elsewhere.
   */
  IdempotencyGuard guard();

  /** Closes the application, as on SIGTERM. */
  @Override
  void close();
}
