package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * Thrown by a sender (or completing an {@link AsyncSender}'s stage) whose send may have happened,
 * but whose outcome may be neither recorded nor released: the guard leaves the key claimed as a
 * crash would leave it. It writes nothing (no outcome, no release), stops renewing the lease and
 * reports {@link IdempotencyEvent.Type#OUTCOME_ABANDONED}; the caller gets this exception. A repeat
 * of the key gets {@link IdempotencyInProgressException} until the lease runs out, and may then
 * take the key over and send again ({@link IdempotencyEvent.Type#TAKEOVER}, attempt 2, with the
 * same provider key): the rare duplicate of a crash, reported as one.
 *
 * <p>For integrations that learn after the send that the work around it can neither be confirmed
 * nor undone: the Spring Boot starter throws it for a JMS delivery whose session was closed under
 * it before its commit (the broker delivers the message again, and recording would acknowledge that
 * redelivery without the work of its transaction). Honoured by {@link IdempotencyGuard#execute} and
 * {@link IdempotencyGuard#executeAsync} and their outcome forms, and by {@link Batch#failed}: a
 * batch item failed with it is left claimed the same way, and listed in {@link
 * Batch.Recorded#notRecorded()}.
 *
 * <p>It is the sender's signal, not the guard's refusal, so it is not an {@link
 * IdempotencyException}.
 */
public class OutcomeAbandonedException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message why the outcome can be neither recorded nor released (never the key in clear)
   * @param cause the failure that left it unknown, or {@code null}
   */
  public OutcomeAbandonedException(String message, @Nullable Throwable cause) {
    super(message, cause);
  }
}
