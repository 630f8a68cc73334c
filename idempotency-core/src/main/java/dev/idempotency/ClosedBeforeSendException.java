package dev.idempotency;

/**
 * A call of a guard that {@link IdempotencyGuard#close()} gave up on before its send could start:
 * nothing was sent, and a claim granted for it was released. Its caller sees a {@link
 * KeyStoreException}; the guard tells it apart from a store failure, which it is not (the breaker
 * is not told, and a fail-open call does not send).
 */
final class ClosedBeforeSendException extends KeyStoreException {

  ClosedBeforeSendException(String keyId) {
    super(
        "The guard was closed before the send of key "
            + keyId
            + " could start (its grace period had passed); nothing was sent",
        null);
  }
}
