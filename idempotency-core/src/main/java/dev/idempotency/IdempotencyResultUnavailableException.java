package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * The key's first call did send, but its result cannot be returned: it could not be encoded, was
 * larger than the store accepts, or the stored bytes can no longer be decoded (the result type
 * changed between deploys). Nothing is sent again; the message went out once.
 */
public class IdempotencyResultUnavailableException extends IdempotencyException {

  private final transient String keyDigest;

  /**
   * Creates the exception.
   *
   * @param keyDigest the digest of the key, never the key in clear
   * @param reason why the result is unavailable
   * @param cause the decoding failure, or {@code null}
   */
  public IdempotencyResultUnavailableException(
      String keyDigest, String reason, @Nullable Throwable cause) {
    super(
        "Key " + keyDigest + " was already sent, but its result is unavailable: " + reason, cause);
    this.keyDigest = keyDigest;
  }

  /**
   * The digest of the key, as stored.
   *
   * @return the key digest
   */
  public String keyDigest() {
    return keyDigest;
  }
}
