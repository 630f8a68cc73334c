package dev.idempotency;

/**
 * Decides whether a sender's failure is permanent. A permanent failure (an invalid phone number, an
 * unsubscribed address) is stored for the key's window, and repeats get an {@link
 * IdempotencyStoredFailureException} without calling the sender. Any other failure releases the
 * claim, so that a retry sends again.
 *
 * <p>Called on the sending thread; must be fast and must not throw.
 */
@FunctionalInterface
public interface FailureClassifier {

  /**
   * Whether the failure should be stored and replayed instead of retried.
   *
   * @param failure what the sender threw; never null, never an {@link Error}
   * @return {@code true} to store it
   */
  boolean isPermanent(Throwable failure);

  /**
   * The default: every failure is transient and releases the claim.
   *
   * @return a classifier that answers {@code false}
   */
  static FailureClassifier neverPermanent() {
    return failure -> false;
  }
}
