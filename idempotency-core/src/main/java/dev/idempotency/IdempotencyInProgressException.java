package dev.idempotency;

import java.time.Duration;

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

  static IdempotencyInProgressException afterWaiting(
      String keyDigest, Duration waited, Throwable cause) {
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
