package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * The store answered, but the record it holds for one key cannot be read (its stored value is not
 * one of the store's records: written by something else, or damaged). It is that key's error, not
 * the store's: unlike other {@link KeyStoreException}s it says nothing of whether the store is
 * available, so a lookup or deletion that fails with it ({@link IdempotencyGuard#find}, {@link
 * IdempotencyGuard#forget}) does not make the guard refuse other calls as during an outage. A claim
 * of such a key (a blocking, async or batch call) fails with it too, for that key alone: nothing is
 * sent for it, even by a guard that fails open (the record may be a completed send).
 *
 * <p>Store implementations throw it for a stored value they cannot parse. Its message never carries
 * a key or a result in clear.
 */
public class UnreadableRecordException extends KeyStoreException {

  /**
   * Creates the exception.
   *
   * @param message what could not be read, without keys or results in clear
   * @param cause the parser's exception, or {@code null}
   */
  public UnreadableRecordException(String message, @Nullable Throwable cause) {
    super(message, cause);
  }
}
