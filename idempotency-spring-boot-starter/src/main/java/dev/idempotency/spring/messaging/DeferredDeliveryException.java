package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;

/**
 * An {@link IdempotentListener} did not run for a delivery and must see it again later: its key is
 * being sent by another consumer (a redelivery after a rebalance or a timeout), or the store could
 * not be asked. The message is not acknowledged; each broker's hook brings it back after a growing
 * pause and never dead-letters it for this reason (Kafka: the container's error handler retries it
 * with the messaging backoff, without limit; RabbitMQ: requeued after the pause; JMS: acknowledged
 * and sent again to its destination with a delivery delay, in the same session).
 *
 * <p>The message names the listener (the operation) and the key's digest, never the key.
 */
public class DeferredDeliveryException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  private final transient String operation;
  private final transient String keyDigest;

  /**
   * Creates the exception.
   *
   * @param operation the listener's operation name
   * @param keyDigest the digest of the key, or {@code store} when the store failed
   * @param reason why the delivery is deferred
   * @param cause the guard's exception
   */
  public DeferredDeliveryException(
      String operation, String keyDigest, String reason, Throwable cause) {
    super(
        "Listener " + operation + " deferred a delivery of key " + keyDigest + ": " + reason,
        cause);
    this.operation = operation;
    this.keyDigest = keyDigest;
  }

  /**
   * The listener's operation name.
   *
   * @return the name
   */
  public String operation() {
    return operation;
  }

  /**
   * The key's digest, or {@code store} when the store failed.
   *
   * @return the digest
   */
  public String keyDigest() {
    return keyDigest;
  }

  /**
   * Whether a listener's failure means "not now, later": this exception, an {@link
   * IdempotencyInProgressException} or a {@link KeyStoreException} anywhere in the cause chain (an
   * {@code @Idempotent} method called by a listener throws those).
   *
   * @param failure what the listener threw, possibly wrapped by its container
   * @return the deferral, or {@code null} if the failure is of another kind
   */
  public static Throwable deferralIn(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof DeferredDeliveryException
          || t instanceof IdempotencyInProgressException
          || t instanceof KeyStoreException) {
        return t;
      }
    }
    return null;
  }

  /** What identifies a deferral for its backoff: the key's digest, or {@code store}. */
  static String backOffId(Throwable deferral) {
    if (deferral instanceof DeferredDeliveryException deferred) {
      return deferred.keyDigest();
    }
    if (deferral instanceof IdempotencyInProgressException inProgress) {
      return inProgress.keyDigest();
    }
    return "store";
  }
}
