package dev.idempotency;

/**
 * The base of every exception the SDK throws for a condition of the idempotency protocol. Misuse (a
 * bad argument) is a plain {@link IllegalArgumentException} or {@link NullPointerException}
 * instead, and a sender's own unchecked exception reaches the caller unwrapped.
 *
 * <p>Messages name the key only by its digest, never in clear.
 */
public class IdempotencyException extends RuntimeException {

  /**
   * Creates an exception with a message and an optional cause.
   *
   * @param message what happened and what to do
   * @param cause the underlying failure, or {@code null}
   */
  protected IdempotencyException(String message, Throwable cause) {
    super(message, cause);
  }
}
