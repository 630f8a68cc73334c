package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * The key store failed (unreachable, timed out, refused a statement). When thrown by {@link
 * IdempotencyGuard#execute}, nothing was sent because of it: the guard fails closed unless {@link
 * IdempotencyGuard.Builder#failOpen(boolean) fail-open} was chosen.
 *
 * <p>Store implementations throw it for every failure of their backend. Its message never carries a
 * key in clear.
 */
public class KeyStoreException extends IdempotencyException {

  /**
   * Creates the exception.
   *
   * @param message what failed, without keys or results in clear
   * @param cause the backend's exception, or {@code null}
   */
  public KeyStoreException(String message, @Nullable Throwable cause) {
    super(message, cause);
  }
}
