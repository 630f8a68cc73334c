package dev.idempotency;

/**
 * The key's first call failed permanently (its {@link FailureClassifier} said so), and that failure
 * is stored for the window: a repeat gets it again without a send. The original exception is not
 * rebuilt (that would take Java serialization); its type and message are kept.
 */
public class IdempotencyStoredFailureException extends IdempotencyException {

  private final transient String keyDigest;
  private final transient String failureType;
  private final transient String failureMessage;

  /**
   * Creates the exception.
   *
   * @param keyDigest the digest of the key, never the key in clear
   * @param failureType the class name of the original failure
   * @param failureMessage its message, or empty
   */
  public IdempotencyStoredFailureException(
      String keyDigest, String failureType, String failureMessage) {
    super(
        "Key "
            + keyDigest
            + " failed permanently on its first call and is not sent again: "
            + failureType
            + (failureMessage.isEmpty() ? "" : ": " + failureMessage),
        null);
    this.keyDigest = keyDigest;
    this.failureType = failureType;
    this.failureMessage = failureMessage;
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
   * The class name of the original failure.
   *
   * @return a fully qualified class name
   */
  public String failureType() {
    return failureType;
  }

  /**
   * The message of the original failure.
   *
   * @return the message, empty if it had none
   */
  public String failureMessage() {
    return failureMessage;
  }
}
