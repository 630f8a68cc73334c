package dev.idempotency;

import java.time.Duration;

/**
 * A guarded call's key, window and optional request fingerprint, for {@link
 * IdempotencyGuard#executeForOutcome}. Validated on construction.
 *
 * <p>The fingerprint identifies the request's content (for example a hash of the canonical request
 * body). A repeat of the key with a different fingerprint is refused with {@link
 * IdempotencyKeyReuseException} instead of replaying another request's result.
 *
 * @param key the idempotency key (see {@link IdempotencyKey})
 * @param ttl the window, positive and at most 365 days
 * @param fingerprint the request fingerprint, or {@code null} for none
 */
public record IdempotencyRequest(String key, Duration ttl, String fingerprint) {

  /**
   * Validates the key and the ttl.
   *
   * @param key see {@link #key()}
   * @param ttl see {@link #ttl()}
   * @param fingerprint see {@link #fingerprint()}
   */
  public IdempotencyRequest {
    IdempotencyKey.requireValid(key);
    IdempotencyWindows.requireValidTtl(ttl);
  }

  /**
   * A request without a fingerprint.
   *
   * @param key the idempotency key
   * @param ttl the window
   * @return the request
   */
  public static IdempotencyRequest of(String key, Duration ttl) {
    return new IdempotencyRequest(key, ttl, null);
  }

  /**
   * The same request with a fingerprint.
   *
   * @param requestFingerprint any string that identifies the request's content; not null
   * @return a new request
   */
  public IdempotencyRequest withFingerprint(String requestFingerprint) {
    if (requestFingerprint == null) {
      throw new NullPointerException("fingerprint must not be null");
    }
    return new IdempotencyRequest(key, ttl, requestFingerprint);
  }

  @Override
  public String toString() {
    return "IdempotencyRequest[key=" + Digests.keyId(key) + ", ttl=" + ttl + "]";
  }
}
