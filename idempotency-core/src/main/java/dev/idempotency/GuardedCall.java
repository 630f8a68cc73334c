package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import java.time.Instant;
import java.util.concurrent.TimeUnit;

/**
 * One blocking run of {@link IdempotencyGuard#executeForOutcome}, driving {@link CallSupport}'s
 * decisions on the caller's thread:
 *
 * <ol>
 *   <li>claim the key atomically;
 *   <li>if another call holds it, replay its result, wait for it with backoff, or give up;
 *   <li>if claimed, run the sender with no store resource held, the lease renewed meanwhile;
 *   <li>record the outcome fenced by the owner token (retrying a few times), or release the claim
 *       if the sender failed.
 * </ol>
 */
final class GuardedCall<T> {

  private final CallSupport<T> call;
  private final Sender<T> sender;

  GuardedCall(
      GuardSettings settings, IdempotencyRequest request, ResultCodec<T> codec, Sender<T> sender) {
    this.call = new CallSupport<>(settings, request, codec);
    this.sender = sender;
  }

  Outcome<T> run() {
    return call.events.observed(this::claimAndSend);
  }

  private Outcome<T> claimAndSend() {
    Outcome<T> cached = call.nearCacheReplay();
    if (cached != null) {
      return cached;
    }
    while (true) {
      Instant now = call.settings.clock.instant();
      ClaimRequest claim = call.claimRequest(CallSupport.newOwnerToken(), now);
      long askedAt = call.settings.leaseNow(now);
      long askedAtMono = GuardSettings.monoNow();
      ClaimResult result = null;
      RuntimeException error = call.breaker.refusal();
      if (error == null) {
        try {
          result = call.settings.store.claim(claim);
        } catch (RuntimeException e) {
          error = e;
        } catch (Error e) {
          call.settings.outages.claimAbandoned();
          throw e;
        }
      }
      CallSupport.Next<T> next = call.decide(claim, askedAt, askedAtMono, result, error, true);
      if (next instanceof CallSupport.Send<T> send) {
        return sendAsOwner(send.claim());
      } else if (next instanceof CallSupport.SendUnclaimed<T>) {
        return new Outcome<>(callSender(1, call.context(1)), false, 1, false);
      } else if (next instanceof CallSupport.Replay<T> replay) {
        return replay.outcome();
      } else if (next instanceof CallSupport.Refuse<T> refuse) {
        throw refuse.error();
      }
      try {
        TimeUnit.NANOSECONDS.sleep(((CallSupport.Wait<T>) next).nanos());
      } catch (InterruptedException e) {
        throw call.interruptedWhileWaiting(e);
      }
    }
  }

  private Outcome<T> sendAsOwner(Claim claim) {
    int attempt = claim.attempt;
    if (!call.lease.readyToSend(claim)) {
      throw call.lease.lateClaimRefused(claim);
    }
    call.lease.startSend(claim);
    try {
      Instant sendStart = call.settings.clock.instant();
      T value;
      try {
        value = callSender(attempt, call.context(claim));
      } catch (Throwable failure) {
        try (Interrupts deferred = Interrupts.deferred()) {
          onSendFailure(claim, failure, call.lease.sendFinished(claim, sendStart), deferred);
        }
        throw failure;
      }
      if (claim.wasToldNotHeld()) {
        // SendContext#leaseHeld() told the sender to send nothing, and it returned: not sent
        throw call.lease.returnedAfterLeaseNotHeld(claim);
      }
      long sendNanos = call.lease.sendFinished(claim, sendStart);
      boolean recorded;
      try (Interrupts deferred = Interrupts.deferred()) {
        recorded = write(claim, RecordState.COMPLETED, call.encode(value, attempt), deferred);
      }
      if (recorded) {
        call.events.emit(Type.COMPLETED, attempt, sendNanos, null);
      }
      return new Outcome<>(value, false, attempt, recorded);
    } finally {
      call.finish(claim);
    }
  }

  /**
   * Runs the sender with {@code context} (under a claim, one whose {@link SendContext#leaseHeld()}
   * checks the claim again, as an async send's does); only unchecked throwables escape, so callers
   * can rethrow them as they are.
   */
  private T callSender(int attempt, SendContext context) {
    try (MdcScope mdc = call.mdc(attempt)) {
      return sender.send(context);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Exception e) {
      throw call.callerException(e);
    }
  }

  /**
   * Stores a permanent failure or releases the claim, the interrupt flag deferred; an {@link
   * OutcomeAbandonedException} leaves the claim as it is.
   */
  private void onSendFailure(Claim claim, Throwable thrown, long sendNanos, Interrupts deferred) {
    Throwable failure = CallSupport.senderFailure(thrown);
    if (failure instanceof OutcomeAbandonedException) {
      // left claimed, as a crash leaves it: finish() stops the renewal, and the lease runs out
      call.events.emit(Type.OUTCOME_ABANDONED, claim.attempt, sendNanos, failure);
      return;
    }
    try {
      if (call.isPermanent(failure)
          && write(claim, RecordState.FAILED, call.failurePayload(failure), deferred)) {
        call.events.emit(Type.FAILURE_STORED, claim.attempt, sendNanos, failure);
        return;
      }
      if (call.outcomePending()) {
        return; // the permanent failure is written in the background: a release would race it
      }
      deferred.clear();
      claim.giveUp();
      if (call.settings.store.release(call.keyId, claim.ownerToken)) {
        call.events.emit(Type.RELEASED, claim.attempt, sendNanos, failure);
      } else {
        CallEvents.log.debug(
            "Key {} was no longer ours to release after a failed send", call.keyId);
      }
    } catch (RuntimeException storeFailure) {
      call.events.releaseFailed(storeFailure);
      call.settings.pendingOutcomes.unsentClaims.release(call.keyId, claim.ownerToken);
      thrown.addSuppressed(storeFailure);
    }
  }

  /**
   * Writes an outcome, fenced, retrying a store failure a few times, with the thread's interrupt
   * flag deferred (see {@link Interrupts}); then hands it to the background ({@link
   * CallSupport#recordLater}). Never throws: after a send, an exception would invite a retry, which
   * is a duplicate.
   */
  private boolean write(Claim claim, RecordState state, byte[] payload, Interrupts deferred) {
    RuntimeException lastFailure = null;
    int attempts = call.settings.completionAttempts;
    for (int round = 1; round <= attempts; round++) {
      deferred.clear();
      try {
        if (call.settings.store.complete(call.complete(claim, state, payload))) {
          return true;
        }
        call.events.notRecorded(claim.attempt, null);
        return false;
      } catch (RuntimeException e) {
        lastFailure = e;
        if (round < attempts) {
          deferred.sleep(CallSupport.completionBackoffMillis(round));
        }
      }
    }
    call.recordLater(claim, state, payload, lastFailure);
    return false;
  }
}
