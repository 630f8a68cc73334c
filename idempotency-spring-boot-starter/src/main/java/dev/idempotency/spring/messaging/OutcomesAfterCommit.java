package dev.idempotency.spring.messaging;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
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
 * A record listener's delivery in a listener container's transaction ({@link
 * ContainerTransactions}): the listener runs on the container's thread as the guard's sender would,
 * through a {@link PendingCall}, but its outcome waits for the transaction's end: recorded after
 * the commit, released after a rollback or a failed commit. The guard renews the key's lease
 * meanwhile. Answers without a run (a replay, a key in flight, a stored failure, a store failure)
 * are the guard's own, as {@link IdempotencyGuard#executeForOutcome} gives them. Stateless.
 */
final class OutcomesAfterCommit {

  private static final Logger log = LoggerFactory.getLogger(IdempotentListener.class);

  /** How much longer than the guard's in-flight wait a delivery waits for the guard's answer. */
  private static final Duration CLAIM_WAIT_MARGIN = Duration.ofMinutes(1);

  private OutcomesAfterCommit() {}

  /**
   * Runs the listener if the guard claims the key, and has its outcome wait for the transaction.
   *
   * @return the guard's answer; for a run, the listener's value, not yet recorded
   * @throws Throwable the guard's refusal, or what the listener threw (its key released first)
   */
  static Outcome<Object> execute(
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
