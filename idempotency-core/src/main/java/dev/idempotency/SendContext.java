package dev.idempotency;

import java.util.Objects;
import java.util.UUID;

/**
 * What a {@link Sender} knows about the send it performs.
 *
 * @param key the caller's idempotency key
 * @param providerKey a stable key for the provider's idempotency header or field, derived from the
 *     key: 43 characters of {@code [A-Za-z0-9_-]}, the same in every process and on every attempt
 * @param providerUuid a name-based (version 5) UUID of the key, for providers that require a UUID
 *     (OneSignal {@code idempotency_key}, APNs {@code apns-id})
 * @param attempt 1 on the first claim, incremented by each lease takeover; above 1 means a previous
 *     attempt may already have reached the provider
 */
public record SendContext(String key, String providerKey, UUID providerUuid, int attempt) {

  /**
   * Checks the components.
   *
   * @param key see {@link #key()}
   * @param providerKey see {@link #providerKey()}
   * @param providerUuid see {@link #providerUuid()}
   * @param attempt see {@link #attempt()}
   */
  public SendContext {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(providerKey, "providerKey");
    Objects.requireNonNull(providerUuid, "providerUuid");
    if (attempt < 1) {
      throw new IllegalArgumentException("attempt must be at least 1, was " + attempt);
    }
  }

  /**
   * Whether this send takes over from an attempt that outlived its lease: the case where the
   * provider may have received the message already.
   *
   * @return {@code true} when {@link #attempt()} is above 1
   */
  public boolean isTakeover() {
    return attempt > 1;
  }

  @Override
  public String toString() {
    return "SendContext[providerKey=" + providerKey + ", attempt=" + attempt + "]";
  }
}
