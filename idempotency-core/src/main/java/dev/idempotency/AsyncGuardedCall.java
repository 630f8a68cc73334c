package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * One non-blocking run of {@link IdempotencyGuard#executeForOutcomeAsync}: the same steps as the
 * blocking call, chained as stages. Waiting for an in-flight first call schedules the next poll on
 * a delayed executor instead of parking a thread.
 */
final class AsyncGuardedCall<T> {

  private final CallSupport<T> call;
  private final AsyncKeyStore store;
  private final AsyncSender<T> sender;

  AsyncGuardedCall(
      CallSupport.Settings settings,
      IdempotencyRequest request,
      ResultCodec<T> codec,
      AsyncSender<T> sender) {
    this.call = new CallSupport<>(settings, request, codec);
    this.store = AsyncStores.of(settings.store(), settings.blockingStoreExecutor());
    this.sender = sender;
  }

  CompletableFuture<Outcome<T>> run() {
    return attempt(0, CallSupport.FIRST_POLL_NANOS);
  }

  private CompletableFuture<Outcome<T>> attempt(long waitStartNanos, long pollNanos) {
    String ownerToken = CallSupport.newOwnerToken();
    CompletionStage<ClaimResult> claim;
    try {
      claim = store.claimAsync(call.claimRequest(ownerToken));
    } catch (RuntimeException e) {
      claim = CompletableFuture.failedFuture(e);
    }
    return claim
        .toCompletableFuture()
        .handle(
            (result, error) -> {
              if (error == null && result instanceof ClaimResult.Failed failed) {
                error = failed.error();
              }
              if (error != null) {
                return onClaimFailure(unwrap(error));
              }
              if (result instanceof ClaimResult.Claimed claimed) {
                if (waitStartNanos != 0) {
                  call.emit(
                      Type.WAITED, claimed.attempt(), System.nanoTime() - waitStartNanos, null);
                }
                return sendAsOwner(ownerToken, claimed);
              }
              return onExisting((ClaimResult.Existing) result, waitStartNanos, pollNanos);
            })
        .thenCompose(stage -> stage);
  }

  private CompletableFuture<Outcome<T>> onClaimFailure(Throwable error) {
    KeyStoreException storeFailure = call.claimFailed(error);
    if (!call.settings.failOpen()) {
      return CompletableFuture.failedFuture(storeFailure);
    }
    call.reportFailOpen(storeFailure);
    return startSend(1).thenApply(value -> new Outcome<>(value, false, 1, false));
  }

  private CompletableFuture<Outcome<T>> onExisting(
      ClaimResult.Existing existing, long waitStartNanos, long pollNanos) {
    try {
      Outcome<T> replayed = call.resolveExisting(existing, waitStartNanos);
      if (replayed != null) {
        return CompletableFuture.completedFuture(replayed);
      }
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
    long waitStart = waitStartNanos == 0 ? System.nanoTime() : waitStartNanos;
    long remaining = call.remainingWaitNanos(waitStart);
    if (remaining <= 0) {
      return CompletableFuture.failedFuture(
          call.inProgress(existing.record().attempt(), System.nanoTime() - waitStart, null));
    }
    long delay = Math.min(pollNanos, remaining);
    return CompletableFuture.runAsync(
            () -> {}, CompletableFuture.delayedExecutor(delay, TimeUnit.NANOSECONDS))
        .thenCompose(
            ignored -> attempt(waitStart, Math.min(pollNanos * 2, CallSupport.MAX_POLL_NANOS)));
  }

  private CompletableFuture<T> startSend(int attempt) {
    try {
      CompletionStage<T> stage = sender.send(call.context(attempt));
      if (stage == null) {
        return CompletableFuture.failedFuture(
            new NullPointerException("the AsyncSender returned a null stage"));
      }
      return stage.toCompletableFuture();
    } catch (Throwable e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private CompletableFuture<Outcome<T>> sendAsOwner(
      String ownerToken, ClaimResult.Claimed claimed) {
    int attempt = claimed.attempt();
    call.reportClaimed(claimed);
    Instant sendStart = call.settings.clock().instant();
    return startSend(attempt)
        .handle(
            (value, error) -> {
              long sendNanos = call.sendFinished(sendStart, attempt);
              if (error != null) {
                return onSendFailure(ownerToken, attempt, unwrap(error), sendNanos);
              }
              return recordOutcome(
                      ownerToken,
                      attempt,
                      RecordState.COMPLETED,
                      call.encode(value, attempt),
                      1,
                      null)
                  .thenApply(
                      recorded -> {
                        if (recorded) {
                          call.emit(Type.COMPLETED, attempt, sendNanos, null);
                        }
                        return new Outcome<>(value, false, attempt, recorded);
                      });
            })
        .thenCompose(stage -> stage);
  }

  private CompletableFuture<Outcome<T>> onSendFailure(
      String ownerToken, int attempt, Throwable thrown, long sendNanos) {
    Throwable failure = CallSupport.senderFailure(thrown);
    RuntimeException toCaller;
    try {
      toCaller = call.callerException(failure);
    } catch (Error error) {
      toCaller = null;
    }
    CompletableFuture<Boolean> stored =
        call.isPermanent(failure)
            ? recordOutcome(
                ownerToken, attempt, RecordState.FAILED, Payloads.failure(failure), 1, null)
            : CompletableFuture.completedFuture(false);
    Throwable result = toCaller != null ? toCaller : failure;
    return stored
        .thenCompose(
            wasStored -> {
              if (wasStored) {
                call.emit(Type.FAILURE_STORED, attempt, sendNanos, failure);
                return CompletableFuture.completedFuture(null);
              }
              return store
                  .releaseAsync(call.keyId, ownerToken)
                  .toCompletableFuture()
                  .handle(
                      (released, error) -> {
                        if (error != null) {
                          CallSupport.log.warn(
                              "Could not release key {} after a failed send; it frees itself when"
                                  + " the lease ends",
                              call.keyId,
                              unwrap(error));
                          result.addSuppressed(unwrap(error));
                        } else if (released) {
                          call.emit(Type.RELEASED, attempt, sendNanos, failure);
                        }
                        return null;
                      });
            })
        .thenCompose(ignored -> CompletableFuture.failedFuture(result));
  }

  /** Writes an outcome, fenced, retrying a store failure; completes with whether it was written. */
  private CompletableFuture<Boolean> recordOutcome(
      String ownerToken,
      int attempt,
      RecordState state,
      byte[] payload,
      int round,
      Throwable last) {
    if (round > call.settings.completionAttempts()) {
      call.reportNotRecorded(attempt, last);
      return CompletableFuture.completedFuture(false);
    }
    CompletionStage<Boolean> write;
    try {
      write =
          store.completeAsync(
              new CompleteRequest(
                  call.keyId, ownerToken, state, payload, call.settings.clock().instant()));
    } catch (RuntimeException e) {
      write = CompletableFuture.failedFuture(e);
    }
    return write
        .toCompletableFuture()
        .handle(
            (written, error) -> {
              if (error == null) {
                if (!written) {
                  call.reportNotRecorded(attempt, null);
                }
                return CompletableFuture.completedFuture(written);
              }
              long backoff = CallSupport.COMPLETION_BACKOFF_MILLIS << (round - 1);
              return CompletableFuture.runAsync(
                      () -> {}, CompletableFuture.delayedExecutor(backoff, TimeUnit.MILLISECONDS))
                  .thenCompose(
                      ignored ->
                          recordOutcome(
                              ownerToken, attempt, state, payload, round + 1, unwrap(error)));
            })
        .thenCompose(stage -> stage);
  }

  private static Throwable unwrap(Throwable error) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
