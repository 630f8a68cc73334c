package dev.idempotency;

/**
 * The sender threw a checked exception, which arrives as this exception's {@linkplain #getCause()
 * cause}. Unchecked exceptions and errors from a sender are rethrown as they are, never wrapped.
 *
 * <p>It is the sender's failure, not the guard's, so it is not an {@link IdempotencyException}: a
 * {@code catch (IdempotencyException e)} catches what the guard and its store decided (in progress,
 * key reuse, store failure, ...) and never a failed send, checked or unchecked. The key was
 * released (or its failure stored, if the {@link FailureClassifier} calls it permanent).
 */
public class SendFailedException extends RuntimeException {

  /**
   * Creates the exception, for the guard and for tests of code that handles it.
   *
   * @param keyDigest the digest of the key, never the key in clear
   * @param cause the sender's checked exception
   */
  public SendFailedException(String keyDigest, Throwable cause) {
    super("The sender failed for key " + keyDigest + ": " + cause, cause);
  }
}
