package dev.idempotency.spring.messaging;

/**
 * A delivery to an {@link IdempotentListener} carries no key: the header is absent or blank, or the
 * key expression evaluated to null. The listener did not run. It is bad input, not a reason to
 * retry: RabbitMQ rejects it without requeue (the queue's dead-letter exchange takes it); Kafka's
 * and JMS's containers apply their retry and dead-letter policy.
 */
public class MissingIdempotencyKeyException extends IllegalArgumentException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what is missing, naming the listener
   */
  public MissingIdempotencyKeyException(String message) {
    super(message);
  }
}
