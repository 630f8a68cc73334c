package dev.idempotency.spring.messaging;

/**
 * A delivery to an {@link IdempotentListener} has no usable key: it is missing ({@link
 * MissingIdempotencyKeyException}), its key expression cannot be evaluated for the message (a field
 * it lacks, an index out of range: SpEL's error is the cause; an exception a method, a getter or a
 * constructor it calls throws is not one, and is retried as the listener's failure), or it is
 * blank, too long once namespaced by the listener's name, holds control characters, or came from an
 * {@code Object.toString()} (a new key on every retry). The listener did not run and nothing was
 * sent. It is a poison message, not a reason to retry: RabbitMQ rejects it without requeue (the
 * queue's dead-letter exchange takes it); Spring Kafka's {@code DefaultErrorHandler} does not retry
 * it (its recoverer, the application's dead-letter topic or the default's log-and-skip, takes it at
 * once); a JMS container rolls it back, and the broker's redelivery limit and dead-letter address
 * apply (each redelivery is refused the same way, never sent).
 */
public class InvalidIdempotencyKeyException extends IllegalArgumentException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what is wrong, naming the listener
   */
  public InvalidIdempotencyKeyException(String message) {
    super(message);
  }

  /**
   * Creates the exception.
   *
   * @param message what is wrong, naming the listener
   * @param cause the key check's own exception
   */
  public InvalidIdempotencyKeyException(String message, Throwable cause) {
    super(message, cause);
  }
}
