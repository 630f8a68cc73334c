package dev.idempotency;

/**
 * The key was used before with a different request fingerprint: the caller reused a key for another
 * request. Nothing was sent. Over HTTP this is {@code 422 Unprocessable Content}.
 */
public class IdempotencyKeyReuseException extends IdempotencyException {

  private final transient String keyDigest;

  /**
   * Creates the exception.
   *
   * @param keyDigest the digest of the key, never the key in clear
   */
  public IdempotencyKeyReuseException(String keyDigest) {
    super(
        "Key "
            + keyDigest
            + " was already used with a different request fingerprint; nothing was sent."
            + " Use a new key for a different request",
        null);
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
