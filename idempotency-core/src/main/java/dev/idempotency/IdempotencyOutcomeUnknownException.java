package dev.idempotency;

/**
 * Strict mode only: the key's previous claim outlived its lease without recording an outcome (its
 * process crashed or stalled), so whether the message went out is unknown. The guard refuses to
 * send again. The record stays until its window ends; resolve it from the provider's records.
 *
 * @see IdempotencyGuard.Builder#takeoverPolicy(TakeoverPolicy)
 */
public class IdempotencyOutcomeUnknownException extends IdempotencyException {

  private final transient String keyDigest;
  private final transient int attempt;

  /**
   * Creates the exception.
   *
   * @param keyDigest the digest of the key, never the key in clear
   * @param attempt the attempt whose outcome is unknown
   */
  public IdempotencyOutcomeUnknownException(String keyDigest, int attempt) {
    super(
        "Key "
            + keyDigest
            + ": attempt "
            + attempt
            + " outlived its lease without recording an outcome, so it may or may not have sent."
            + " Strict mode refuses to send again",
        null);
    this.keyDigest = keyDigest;
    this.attempt = attempt;
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
   * The attempt whose outcome is unknown.
   *
   * @return the attempt number
   */
  public int attempt() {
    return attempt;
  }
}
