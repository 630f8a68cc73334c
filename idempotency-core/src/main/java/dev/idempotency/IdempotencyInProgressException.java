package dev.idempotency;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * A repeat found the key's first call still in flight and gave up waiting for it. Nothing was sent
 * by this call. The caller should retry later; over HTTP this is {@code 409 Conflict}, as in the
 * IETF draft "The Idempotency-Key HTTP Header Field".
 */
public class IdempotencyInProgressException extends IdempotencyException {

  private final transient String keyDigest;
  private final transient Duration waited;

  private IdempotencyInProgressException(
      String message, String keyDigest, Duration waited, Throwable cause) {
    super(message, cause);
    this.keyDigest = keyDigest;
    this.waited = waited;
  }

  /**
   * Creates the exception a repeat gets after waiting for the key's first call.
   *
   * @param keyDigest the digest of the key, never the key in clear
   * @param waited how long the repeat waited
   * @param cause the store failure that ended the wait early, or {@code null}
   * @return the exception
   */
  public static IdempotencyInProgressException afterWaiting(
      String keyDigest, Duration waited, @Nullable Throwable cause) {
    return new IdempotencyInProgressException(
        String.format(
            "Key %s is still being sent by another call after waiting %d ms; nothing was sent,"
                + " retry later",
            keyDigest, waited.toMillis()),
        keyDigest,
        waited,
        cause);
  }

  /**
   * The digest of the key, as stored.
   *
   * @return the key digest
   */
  public String keyDigest() {
    return keyDigest;
  }

  /**
   * How long this call waited for the in-flight call.
   *
   * @return the wait, zero if it did not wait
   */
  public Duration waited() {
    return waited;
  }
}
