package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * The base of every exception the SDK throws for a condition of the idempotency protocol: {@link
 * IdempotencyInProgressException} (409), {@link IdempotencyKeyReuseException} (422), {@link
 * KeyStoreException} (503), {@link IdempotencyStoredFailureException}, {@link
 * IdempotencyOutcomeUnknownException} and {@link IdempotencyResultUnavailableException}. A {@code
 * catch} of this type catches exactly those, and nothing the sender threw: a sender's unchecked
 * exception reaches the caller as it is, a checked one as {@link SendFailedException}, which is not
 * an {@code IdempotencyException}. Misuse (a bad argument) is a plain {@link
 * IllegalArgumentException} or {@link NullPointerException}.
 *
 * <p>Every subtype has a public constructor, so that tests can check how an application maps them
 * (to HTTP statuses, for example) without staging the condition.
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
  protected IdempotencyException(String message, @Nullable Throwable cause) {
    super(message, cause);
  }
}
