package dev.idempotency.spring.messaging;

/**
 * A record listener's manual acknowledgement (Spring Kafka's {@code Acknowledgment} parameter),
 * handed to the listener in place of the container's, for {@link IdempotentListenerInterceptor}: a
 * {@code nack(sleep)}, which has the container poll the record again, is held, so that the key is
 * released as for a failure (the send did not happen) before it is passed on; the rest is passed on
 * at once.
 */
interface HeldNack {

  /** Whether the listener nacked its record. */
  boolean nacked();

  /** Passes the listener's nack on to the container. */
  void passNack();

  /** Gives the listener's argument back its container's acknowledgement. */
  void restore();

  /**
   * What the listener's call ends with once it nacked: its key is released as for a failure (the
   * application's {@code FailureClassifier} should not take it for permanent), then the nack is
   * passed on and the delivery returns normally.
   */
  final class Nacked extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Nacked() {
      super("the listener nacked its record: it comes back, not sent", null, false, false);
    }
  }
}
