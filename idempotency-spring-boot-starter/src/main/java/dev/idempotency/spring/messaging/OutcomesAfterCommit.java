package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.OutcomeAbandonedException;
import dev.idempotency.ResultCodec;
import dev.idempotency.Sender;
import dev.idempotency.spring.PendingCall;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs one guarded delivery of a listener so that its outcome is recorded only once the listener
 * container's transaction committed: shared by {@link IdempotentListener} record listeners and by
 * {@link dev.idempotency.spring.Idempotent} methods that are listener methods (Spring Kafka's,
 * JMS's and Spring AMQP's listener annotations).
 *
 * <ul>
 *   <li>Outside a listener container's transaction (a Kafka container's transaction, a transacted
 *       JMS session, a Spring-managed transaction around the listener): the guard's own {@link
 *       IdempotencyGuard#executeForOutcome}; the outcome is recorded when the listener returns.
 *   <li>Inside one: the listener runs on the container's thread as the guard's sender would,
 *       through a {@link PendingCall}, but its outcome waits for the transaction's end: recorded
 *       after the commit, released after a rollback or a failed commit. The guard renews the key's
 *       lease meanwhile. Answers without a run (a replay, a key in flight, a stored failure, a
 *       store failure) are the guard's own, as {@link IdempotencyGuard#executeForOutcome} gives
 *       them.
 * </ul>
 *
 * <p>For the starter's integrations; applications use {@link IdempotentListener} or {@link
 * dev.idempotency.spring.Idempotent}. Stateless and thread-safe; the transaction it waits for is
 * the one bound to the calling thread.
 */
public final class OutcomesAfterCommit {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  /** How much longer than the guard's in-flight wait a delivery waits for the guard's answer. */
  private static final Duration CLAIM_WAIT_MARGIN = Duration.ofMinutes(1);

  private OutcomesAfterCommit() {}

  /**
   * Runs a listener's delivery through the guard; in a listener container's transaction, its
   * outcome waits for the transaction's end. On a Kafka, RabbitMQ or JMS container's consumer
   * thread, an interrupt the listener's run left (a provider client interrupted mid-send) is
   * cleared before this returns, with a warning: a Kafka consumer fails every poll and commit on an
   * interrupted thread, and a RabbitMQ consumer stops its container.
   *
   * @param guard the guard
   * @param request the delivery's key, window, operation and fingerprint
   * @param codec the codec of the listener's result
   * @param listener the listener's name, for the log and the release's cause
   * @param listenerRun runs the listener with the call's context
   * @return the guard's answer; for a run in a transaction, the listener's value, not yet recorded
   * @throws Throwable the guard's refusal, or what the listener threw (its key released first);
   *     outside a transaction, a checked exception of the listener arrives wrapped as the guard
   *     wraps it ({@link dev.idempotency.SendFailedException})
   */
  public static Outcome<Object> executeForOutcome(
      IdempotencyGuard guard,
      IdempotencyRequest request,
      ResultCodec<Object> codec,
      String listener,
      Sender<Object> listenerRun)
      throws Throwable {
    Delivery delivery = Delivery.current();
    try {
      if (!ContainerTransactions.active()) {
        return guard.executeForOutcome(request, codec, listenerRun);
      }
      return afterCommit(guard, request, codec, listener, listenerRun);
    } finally {
      // the outcome was recorded (or its record handed on) with any interrupt held back; on a
      // Kafka, RabbitMQ or JMS consumer's thread the interrupt must not reach the container's
      // acknowledgement and its next wait for messages (it fails every Kafka poll)
      ConsumerThreadInterrupts.clearAfterDelivery(delivery, listener);
    }
  }

  /**
   * Runs the listener if the guard claims the key, and has its outcome wait for the transaction.
   */
  private static Outcome<Object> afterCommit(
      IdempotencyGuard guard,
      IdempotencyRequest request,
      ResultCodec<Object> codec,
      String listener,
      Sender<Object> listenerRun)
      throws Throwable {
    Duration maxWait = guard.inFlightWait().plus(CLAIM_WAIT_MARGIN);
    PendingCall<Object> call = PendingCall.claim(guard, request, codec, maxWait);
    if (!call.claimed()) {
      try {
        return call.outcome().join();
      } catch (CompletionException e) {
        throw PendingCall.unwrap(e);
      }
    }
    Object value;
    try (PendingCall.Scope mdc = call.enter()) {
      value = listenerRun.send(call.context());
    } catch (Throwable failure) {
      // released (or stored, if permanent) before the container rolls back and redelivers
      call.fail(failure);
      awaitQuietly(call.outcome(), maxWait);
      throw failure;
    }
    ContainerTransactions.onCompletion(
        new ContainerTransactions.Completion() {
          @Override
          public void committed() {
            call.complete(value);
            awaitQuietly(call.outcome(), maxWait);
          }

          @Override
          public void rolledBack() {
            log.debug(
                "Listener {} released key {}: the container's transaction did not commit",
                listener,
                IdempotencyKey.digest(request.key()));
            call.fail(new TransactionNotCommittedException(listener));
            awaitQuietly(call.outcome(), maxWait);
          }

          @Override
          public void abandoned() {
            // neither recorded nor released: the key runs out one lease later, as after a crash
            call.fail(
                new OutcomeAbandonedException(
                    "the listener container's transaction of a delivery to "
                        + listener
                        + " can no longer commit, and the broker delivers it again; its send"
                        + " happened, so its key is left claimed until its lease runs out",
                    null));
            awaitQuietly(call.outcome(), maxWait);
          }
        });
    return new Outcome<>(value, false, call.context().attempt(), false);
  }

  /** Waits, bounded, for an outcome the guard writes; its own failure changes nothing here. */
  private static void awaitQuietly(CompletableFuture<?> outcome, Duration maxWait) {
    try {
      outcome.get(maxWait.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // a failed write is the guard's to report (an event, a warning)
    }
  }

  /** What a delivery whose container transaction did not commit is released with. */
  static final class TransactionNotCommittedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TransactionNotCommittedException(String listener) {
      super(
          "the listener container's transaction of a delivery to "
              + listener
              + " did not commit; the broker delivers it again");
    }
  }
}
