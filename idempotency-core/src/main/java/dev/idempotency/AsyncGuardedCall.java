package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

/**
 * One non-blocking run of {@link IdempotencyGuard#executeForOutcomeAsync}: the steps of {@link
 * GuardedCall}, driven by the same {@link CallSupport} decisions, chained as stages. Every step
 * after a store or a sender answered runs on the call's executor (the guard's async executor, or
 * the caller's waiting thread; see {@link Stages}), never on a store's I/O thread; waiting for an
 * in-flight call schedules the next poll instead of parking a thread.
 */
final class AsyncGuardedCall<T> {

  private final CallSupport<T> call;
  private final AsyncSender<T> sender;
  private final Executor executor;

  AsyncGuardedCall(
      GuardSettings settings,
      IdempotencyRequest request,
      ResultCodec<T> codec,
      AsyncSender<T> sender,
      Executor executor) {
    this.call = new CallSupport<>(settings, request, codec);
    this.sender = sender;
    this.executor = executor;
  }

  CompletableFuture<Outcome<T>> run() {
    IdempotencyObserver.CallObservation observation = call.events.start();
    CompletableFuture<Outcome<T>> result;
    try {
      Outcome<T> cached = call.nearCacheReplay();
      result = cached != null ? CompletableFuture.completedFuture(cached) : attempt();
      call.settings.pendingStages.track(result); // close() completes it if it gives up on it
    } catch (RuntimeException | Error e) {
      observation.onEnd(e);
      throw e;
    }
    // every stage from here on is a CallerStage, completed the way any dependent stage is (so its
    // callbacks, and the guard's own, run in the order they always did)
    return CallerStage.root(call.breaker::callerGaveUp)
        .thenCompose(ignored -> result)
        .exceptionallyCompose(
            failure -> CompletableFuture.failedFuture(abandonedIfRejected(failure)))
        .whenComplete((outcome, failure) -> observation.onEnd(Stages.unwrapOrNull(failure)));
  }

  /**
   * A step the guard's own executor refused because {@link IdempotencyGuard#close()} shut it down
   * after its grace period: the call was abandoned (nothing was written or released for it), which
   * the caller learns by name rather than as a bare rejection.
   */
  private Throwable abandonedIfRejected(Throwable failure) {
    Throwable cause = Stages.unwrap(failure);
    if (cause instanceof java.util.concurrent.RejectedExecutionException
        && call.settings.closed()) {
      return new IllegalStateException(
          "The IdempotencyGuard was closed before this call of key "
              + call.keyId
              + " finished, after its grace period: its outcome was not recorded by then, and its"
              + " key can be taken over one lease after its last renewal (as after a crash)",
          cause);
    }
    return failure;
  }

  private CompletableFuture<Outcome<T>> attempt() {
    Instant now = call.settings.clock.instant();
    ClaimRequest claim = call.claimRequest(CallSupport.newOwnerToken(), now);
    long askedAt = call.settings.leaseNow(now);
    long askedAtMono = GuardSettings.monoNow();
    CompletionStage<ClaimResult> answer;
    // a blocking store's claim may wait in the executor's queue: it asks the breaker as it starts
    boolean queued = AsyncStores.queuesCalls(call.settings.asyncStore);
    KeyStoreException refusal =
        queued ? call.breaker.refusalBeforeQueueing() : call.breaker.refusal();
    if (refusal != null) {
      answer = CompletableFuture.failedFuture(refusal);
    } else {
      try {
        answer =
            queued
                ? AsyncStores.claimWhenStarted(call.settings.asyncStore, claim, call)
                : call.settings.asyncStore.claimAsync(claim);
      } catch (RuntimeException e) {
        answer = CompletableFuture.failedFuture(e);
      } catch (Error e) {
        call.settings.outages.claimAbandoned();
        throw e;
      }
    }
    return Stages.continueOrReject(
        answer,
        (result, error) -> next(call.decide(claim, askedAt, askedAtMono, result, error, true)),
        executor,
        (result, error, refused) -> {
          // the thread that completed the claim holds it, and nothing was sent: release it now
          if (result instanceof ClaimResult.Claimed granted) {
            call.lease.releaseUnsent(claim.ownerToken());
            return call.settings.gaveUp()
                ? call.lease.closedBeforeSend(granted.attempt())
                : refused;
          }
          if (error instanceof ClosedBeforeSendException closed) {
            return closed; // refused where it was queued, and reported there
          }
          if (CallSupport.mayHaveReachedTheStore(error)) {
            // a claim whose answer was lost may still hold the key: take it back, as decide would
            call.settings.pendingOutcomes.unsentClaims.takeBack(call.keyId, claim.ownerToken());
          }
          return call.settings.gaveUp() ? call.lease.closedBeforeSend(0) : refused;
        });
  }

  /**
   * Runs a step towards the send of a granted claim on {@code stepExecutor}; if that executor
   * refuses it (a pool the guard's close() stopped), the claim is released on this thread instead,
   * since nothing was sent (see {@link SendLease#releaseUnsent}).
   */
  private <R> CompletableFuture<R> beforeSend(
      Claim claim, java.util.function.Supplier<R> step, Executor stepExecutor) {
    try {
      return CompletableFuture.supplyAsync(step, stepExecutor);
    } catch (java.util.concurrent.RejectedExecutionException refused) {
      return CompletableFuture.failedFuture(unsent(claim, refused));
    }
  }

  /** The failure of a granted claim that cannot go on to its send, once released. */
  private Throwable unsent(Claim claim, java.util.concurrent.RejectedExecutionException refused) {
    claim.finish();
    call.lease.releaseUnsent(claim.ownerToken);
    return call.settings.gaveUp() ? call.lease.closedBeforeSend(claim.attempt) : refused;
  }

  private CompletableFuture<Outcome<T>> next(CallSupport.Next<T> next) {
    if (next instanceof CallSupport.Send<T> send) {
      Claim claim = send.claim();
      if (!call.lease.needsRenewalBeforeSend(claim)) {
        // no store work to decide: without renewal a claim whose lease ran out is refused here
        return call.lease.readyToSend(claim)
            ? sendAsOwner(claim)
            : beforeSend(
                claim,
                () -> {
                  throw call.lease.lateClaimRefused(claim); // releases, fenced: store work
                },
                call.settings.blockingStoreExecutor);
      }
      // a late claim's renewal is blocking store work: never on this (possibly I/O) thread. The
      // send then waits for a thread of the call's executor, which may take longer than the lease
      // (an async pool busy with slow senders): the keeper renews the claim from its renewal on,
      // and the claim is decided again once there (this method), so that a lease lost or run out
      // meanwhile is never sent on (issue 37: a send on a claim another caller had taken over)
      return Stages.continueOrReject(
          beforeSend(
              claim,
              () -> {
                boolean ready = call.lease.readyToSend(claim);
                if (ready) {
                  call.lease.keepUntilSend(claim);
                }
                return ready;
              },
              call.settings.blockingStoreExecutor),
          (ready, error) -> {
            if (error != null) {
              return CompletableFuture.<Outcome<T>>failedFuture(error);
            }
            return ready
                ? next(send)
                : CompletableFuture.<Outcome<T>>failedFuture(call.lease.lateClaimRefused(claim));
          },
          executor,
          (ready, error, refused) ->
              ready == null
                  ? refused
                  : ready ? unsent(claim, refused) : call.lease.lateClaimRefused(claim));
    } else if (next instanceof CallSupport.SendUnclaimed<T>) {
      return startSend(call.context(1)).thenApply(value -> new Outcome<>(value, false, 1, false));
    } else if (next instanceof CallSupport.Replay<T> replay) {
      return CompletableFuture.completedFuture(replay.outcome());
    } else if (next instanceof CallSupport.Refuse<T> refuse) {
      return CompletableFuture.failedFuture(refuse.error());
    }
    return Stages.delay(((CallSupport.Wait<T>) next).nanos(), executor)
        .thenCompose(ignored -> attempt());
  }

  private CompletableFuture<T> startSend(SendContext context) {
    try (MdcScope mdc = call.mdc(context.attempt())) {
      CompletionStage<T> stage = sender.send(context);
      if (stage == null) {
        return CompletableFuture.failedFuture(
            new NullPointerException("the AsyncSender returned a null stage"));
      }
      return stage.toCompletableFuture();
    } catch (Throwable e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private CompletableFuture<Outcome<T>> sendAsOwner(Claim claim) {
    int attempt = claim.attempt;
    call.lease.startSend(claim);
    Instant sendStart = call.settings.clock.instant();
    return Stages.<T, Outcome<T>>continueOn(
            startSend(call.context(claim)),
            (value, error) -> {
              long sendNanos = call.lease.sendFinished(claim, sendStart);
              if (error != null) {
                return onSendFailure(claim, error, sendNanos);
              }
              if (claim.wasToldNotHeld()) {
                // SendContext#leaseHeld() told the sender to send nothing, and it returned
                return CompletableFuture.<Outcome<T>>failedFuture(
                    call.lease.returnedAfterLeaseNotHeld(claim));
              }
              return write(claim, RecordState.COMPLETED, call.encode(value, attempt), 1)
                  .thenApply(
                      recorded -> {
                        if (recorded) {
                          call.events.emit(Type.COMPLETED, attempt, sendNanos, null);
                        }
                        return new Outcome<>(value, false, attempt, recorded);
                      });
            },
            executor)
        .whenComplete((outcome, error) -> call.finish(claim));
  }

  private CompletableFuture<Outcome<T>> onSendFailure(
      Claim claim, Throwable thrown, long sendNanos) {
    Throwable failure = CallSupport.senderFailure(thrown);
    if (failure instanceof OutcomeAbandonedException abandoned) {
      // left claimed, as a crash leaves it: finish() stops the renewal, and the lease runs out
      call.events.emit(Type.OUTCOME_ABANDONED, claim.attempt, sendNanos, failure);
      return CompletableFuture.failedFuture(abandoned);
    }
    RuntimeException toCaller;
    try {
      toCaller = call.callerException(failure);
    } catch (Error error) {
      toCaller = null;
    }
    Throwable result = toCaller != null ? toCaller : failure;
    CompletableFuture<Boolean> stored =
        call.isPermanent(failure)
            ? write(claim, RecordState.FAILED, call.failurePayload(failure), 1)
            : CompletableFuture.completedFuture(false);
    return stored
        .thenCompose(
            wasStored -> {
              if (wasStored) {
                call.events.emit(Type.FAILURE_STORED, claim.attempt, sendNanos, failure);
                return CompletableFuture.completedFuture(null);
              }
              if (call.outcomePending()) {
                // the permanent failure is written in the background: a release would race it
                return CompletableFuture.completedFuture(null);
              }
              return Stages.continueOn(
                  release(claim),
                  (released, error) -> {
                    if (error != null) {
                      call.events.releaseFailed(error);
                      call.settings.pendingOutcomes.unsentClaims.release(
                          call.keyId, claim.ownerToken);
                      result.addSuppressed(error);
                    } else if (released) {
                      call.events.emit(Type.RELEASED, claim.attempt, sendNanos, failure);
                    }
                    return CompletableFuture.completedFuture(null);
                  },
                  executor);
            })
        .thenCompose(ignored -> CompletableFuture.failedFuture(result));
  }

  private CompletionStage<Boolean> release(Claim claim) {
    claim.giveUp();
    try {
      return call.settings.asyncStore.releaseAsync(call.keyId, claim.ownerToken);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  /**
   * Writes an outcome, fenced, retrying a store failure, then hands it to the background ({@link
   * CallSupport#recordLater}); completes with whether it was written now.
   */
  private CompletableFuture<Boolean> write(
      Claim claim, RecordState state, byte[] payload, int round) {
    CompletionStage<Boolean> answer;
    try {
      answer = call.settings.asyncStore.completeAsync(call.complete(claim, state, payload));
    } catch (RuntimeException e) {
      answer = CompletableFuture.failedFuture(e);
    }
    return Stages.continueOn(
        answer,
        (written, error) -> {
          if (error == null) {
            if (!written) {
              call.events.notRecorded(claim.attempt, null);
            }
            return CompletableFuture.completedFuture(written);
          }
          if (round >= call.settings.completionAttempts) {
            call.recordLater(claim, state, payload, Stages.unwrap(error));
            return CompletableFuture.completedFuture(false);
          }
          long backoffNanos = CallSupport.completionBackoffMillis(round) * 1_000_000L;
          return Stages.delay(backoffNanos, executor)
              .thenCompose(ignored -> write(claim, state, payload, round + 1));
        },
        executor);
  }
}
