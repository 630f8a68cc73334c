package dev.idempotency;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * A guarded call's key, window, optional request fingerprint and operation name, for {@link
 * IdempotencyGuard#executeForOutcome}. Validated on construction.
 *
 * <p>The fingerprint identifies the request's content (for example a hash of the canonical request
 * body). A repeat of the key with a different fingerprint is refused with {@link
 * IdempotencyKeyReuseException} instead of replaying another request's result.
 *
 * <p>The operation names the kind of send ({@code otp-sms}, {@code order-shipped-email}) in events,
 * logs and metrics; it is low-cardinality, never the key. By default it is the key's namespace
 * ({@link IdempotencyKey#operationOf}).
 *
 * @param key the idempotency key (see {@link IdempotencyKey})
 * @param ttl the window, positive and at most 365 days
 * @param fingerprint the request fingerprint, or {@code null} for none
 * @param operation the operation name: 1 to 64 characters of {@code [A-Za-z0-9_.-]}
 */
public record IdempotencyRequest(
    String key, Duration ttl, @Nullable String fingerprint, String operation) {

  /**
   * Validates the key, the ttl and the operation.
   *
   * @param key see {@link #key()}
   * @param ttl see {@link #ttl()}
   * @param fingerprint see {@link #fingerprint()}
   * @param operation see {@link #operation()}
   */
  public IdempotencyRequest {
    IdempotencyKey.requireValid(key);
    IdempotencyWindows.requireValidTtl(ttl);
    requireOperation(operation);
  }

  /**
   * A request whose operation is the key's namespace.
   *
   * @param key see {@link #key()}
   * @param ttl see {@link #ttl()}
   * @param fingerprint see {@link #fingerprint()}
   */
  public IdempotencyRequest(String key, Duration ttl, String fingerprint) {
    this(key, ttl, fingerprint, IdempotencyKey.operationOf(IdempotencyKey.requireValid(key)));
  }

  static void requireOperation(String operation) {
    java.util.Objects.requireNonNull(operation, "operation must not be null");
    if (!IdempotencyKey.isOperationName(operation)) {
      throw new IllegalArgumentException(
          "operation must be 1 to 64 characters of [A-Za-z0-9_.-], was '" + operation + "'");
    }
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
    return new IdempotencyRequest(key, ttl, requestFingerprint, operation);
  }

  /**
   * The same request under another operation name.
   *
   * @param operationName 1 to 64 characters of {@code [A-Za-z0-9_.-]}, such as {@code otp-sms}
   * @return a new request
   * @throws IllegalArgumentException if the name is not such a word
   */
  public IdempotencyRequest withOperation(String operationName) {
    return new IdempotencyRequest(key, ttl, fingerprint, operationName);
  }

  @Override
  public String toString() {
    return "IdempotencyRequest[key="
        + Digests.keyId(key)
        + ", ttl="
        + ttl
        + ", operation="
        + operation
        + "]";
  }
}
