package dev.idempotency.spring.messaging;

/**
 * A delivery to an {@link IdempotentListener} carries no key: the header is absent or blank, or the
 * key expression evaluated to null. The listener did not run. A poison message, as every {@link
 * InvalidIdempotencyKeyException} is.
 */
public class MissingIdempotencyKeyException extends InvalidIdempotencyKeyException {

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
