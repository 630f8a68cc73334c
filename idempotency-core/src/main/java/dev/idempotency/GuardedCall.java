package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import java.time.Instant;
import java.util.concurrent.TimeUnit;

/**
 * One blocking run of {@link IdempotencyGuard#executeForOutcome}:
 *
 * <ol>
 *   <li>claim the key atomically;
 *   <li>if another call holds it, replay its result, wait for it with backoff, or give up;
 *   <li>if claimed, run the sender with no store resource held;
 *   <li>record the outcome fenced by the owner token (retrying a few times), or release the claim
 *       if the sender failed.
 * </ol>
 */
final class GuardedCall<T> {

  private final CallSupport<T> call;
  private final Sender<T> sender;

  GuardedCall(
      CallSupport.Settings settings,
      IdempotencyRequest request,
      ResultCodec<T> codec,
      Sender<T> sender) {
    this.call = new CallSupport<>(settings, request, codec);
    this.sender = sender;
  }

  Outcome<T> run() {
    long waitStartNanos = 0;
    long pollNanos = CallSupport.FIRST_POLL_NANOS;
    while (true) {
      String ownerToken = CallSupport.newOwnerToken();
      ClaimResult result;
      try {
        result = call.settings.store().claim(call.claimRequest(ownerToken));
        if (result instanceof ClaimResult.Failed failed) {
          throw failed.error();
        }
      } catch (RuntimeException e) {
        KeyStoreException storeFailure = call.claimFailed(e);
        if (!call.settings.failOpen()) {
          throw storeFailure;
        }
        call.reportFailOpen(storeFailure);
        return new Outcome<>(callSender(1), false, 1, false);
      }
      if (result instanceof ClaimResult.Claimed claimed) {
        if (waitStartNanos != 0) {
          call.emit(Type.WAITED, claimed.attempt(), System.nanoTime() - waitStartNanos, null);
        }
        return sendAsOwner(ownerToken, claimed);
      }
      ClaimResult.Existing existing = (ClaimResult.Existing) result;
      Outcome<T> replayed = call.resolveExisting(existing, waitStartNanos);
      if (replayed != null) {
        return replayed;
      }
      if (waitStartNanos == 0) {
        waitStartNanos = System.nanoTime();
      }
      long remaining = call.remainingWaitNanos(waitStartNanos);
      int attempt = existing.record().attempt();
      if (remaining <= 0) {
        throw call.inProgress(attempt, System.nanoTime() - waitStartNanos, null);
      }
      try {
        TimeUnit.NANOSECONDS.sleep(Math.min(pollNanos, remaining));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw call.inProgress(attempt, System.nanoTime() - waitStartNanos, e);
      }
      pollNanos = Math.min(pollNanos * 2, CallSupport.MAX_POLL_NANOS);
    }
  }

  private Outcome<T> sendAsOwner(String ownerToken, ClaimResult.Claimed claimed) {
    int attempt = claimed.attempt();
    call.reportClaimed(claimed);
    Instant sendStart = call.settings.clock().instant();
    T value;
    try {
      value = callSender(attempt);
    } catch (Throwable failure) {
      onSendFailure(ownerToken, attempt, failure, call.sendFinished(sendStart, attempt));
      throw failure;
    }
    long sendNanos = call.sendFinished(sendStart, attempt);
    boolean recorded =
        recordOutcome(ownerToken, attempt, RecordState.COMPLETED, call.encode(value, attempt));
    if (recorded) {
      call.emit(Type.COMPLETED, attempt, sendNanos, null);
    }
    return new Outcome<>(value, false, attempt, recorded);
  }

  /** Runs the sender; only unchecked throwables escape, so callers can rethrow them as they are. */
  private T callSender(int attempt) {
    try {
      return sender.send(call.context(attempt));
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Exception e) {
      throw call.callerException(e);
    }
  }

  private void onSendFailure(String ownerToken, int attempt, Throwable thrown, long sendNanos) {
    Throwable failure = CallSupport.senderFailure(thrown);
    try {
      if (call.isPermanent(failure)
          && recordOutcome(ownerToken, attempt, RecordState.FAILED, Payloads.failure(failure))) {
        call.emit(Type.FAILURE_STORED, attempt, sendNanos, failure);
        return;
      }
      if (call.settings.store().release(call.keyId, ownerToken)) {
        call.emit(Type.RELEASED, attempt, sendNanos, failure);
      } else {
        CallSupport.log.debug(
            "Key {} was no longer ours to release after a failed send", call.keyId);
      }
    } catch (RuntimeException storeFailure) {
      CallSupport.log.warn(
          "Could not release key {} after a failed send; it frees itself when the lease ends",
          call.keyId,
          storeFailure);
      thrown.addSuppressed(storeFailure);
    }
  }

  /**
   * Writes an outcome, fenced, retrying a store failure a few times. Never throws: after a send, an
   * exception would invite a retry, which is a duplicate.
   */
  private boolean recordOutcome(String ownerToken, int attempt, RecordState state, byte[] payload) {
    RuntimeException lastFailure = null;
    int attempts = call.settings.completionAttempts();
    for (int i = 1; i <= attempts; i++) {
      try {
        CompleteRequest complete =
            new CompleteRequest(
                call.keyId, ownerToken, state, payload, call.settings.clock().instant());
        if (call.settings.store().complete(complete)) {
          return true;
        }
        call.reportNotRecorded(attempt, null);
        return false;
      } catch (RuntimeException e) {
        lastFailure = e;
        if (i < attempts && !pause(CallSupport.COMPLETION_BACKOFF_MILLIS << (i - 1))) {
          break;
        }
      }
    }
    call.reportNotRecorded(attempt, lastFailure);
    return false;
  }

  private static boolean pause(long millis) {
    try {
      Thread.sleep(millis);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }
}
