package dev.idempotency;

/**
 * The sender threw a checked exception, which arrives as this exception's {@linkplain #getCause()
 * cause}. Unchecked exceptions and errors from a sender are rethrown as they are, never wrapped.
 */
public class SendFailedException extends IdempotencyException {

  SendFailedException(String keyDigest, Throwable cause) {
    super("The sender failed for key " + keyDigest + ": " + cause, cause);
  }
}
