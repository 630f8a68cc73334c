package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * The provider call the guard protects: sends one notification and returns what should be replayed
 * to repeats (a notification id, a provider message id).
 *
 * @param <T> the result type
 */
@FunctionalInterface
public interface Sender<T> {

  /**
   * Sends the notification. Pass {@link SendContext#providerKey()} or {@link
   * SendContext#providerUuid()} to the provider's idempotency header or field, so that the rare
   * duplicate after a crash is absorbed there too.
   *
   * @param context the key, the provider keys and the attempt number
   * @return the result to store and replay; may be {@code null}
   * @throws Exception if the send failed; the claim is then released (or, for a permanent failure,
   *     the failure is stored)
   */
  @Nullable T send(SendContext context) throws Exception;
}
