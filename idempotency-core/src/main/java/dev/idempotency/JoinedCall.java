package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.JoinedTransaction;
import dev.idempotency.spi.RecordState;
import java.time.Instant;
import java.util.Optional;

/**
 * One run of {@link IdempotencyGuard#executeInTransaction}, on the caller's thread and inside the
 * caller's transaction:
 *
 * <ol>
 *   <li>claim the key in the transaction, waiting at most {@code inFlightWait} for another
 *       transaction that holds it (the database's lock timeout);
 *   <li>a committed record is replayed (or refused) as in the usual mode, without writing; one in
 *       progress (a call of the usual mode is sending it) is answered at once with {@link
 *       IdempotencyInProgressException}: waiting would keep the caller's transaction open, and on
 *       MySQL and H2 its read lock on the row, which the owner's outcome write waits for;
 *   <li>if claimed, run the sender, which writes through the same transaction;
 *   <li>write the outcome in the transaction; if the sender threw, delete the claim (or store a
 *       permanent failure), so that the key is not left claimed if the caller commits anyway.
 * </ol>
 *
 * The near cache is neither read nor filled: the transaction may see its own uncommitted record,
 * which a rollback takes back. No lease, renewal, takeover of this call's own claim, retry of the
 * outcome's write or fail-open applies: the transaction commits or rolls back the claim, the
 * sender's writes and the outcome as one, so a failure to write the outcome is thrown, for the
 * caller to roll back.
 */
final class JoinedCall<T> {

  private final CallSupport<T> call;
  private final JoinedTransaction transaction;
  private final Sender<T> sender;

  JoinedCall(
      GuardSettings settings,
      JoinedTransaction transaction,
      IdempotencyRequest request,
      ResultCodec<T> codec,
      Sender<T> sender) {
    this.call = new CallSupport<>(settings, request, codec);
    this.call.bypassNearCache();
    this.transaction = transaction;
    this.sender = sender;
  }

  Outcome<T> run() {
    return call.events.observed(this::claimAndSend);
  }

  private Outcome<T> claimAndSend() {
    long startNanos = System.nanoTime();
    Instant now = call.settings.clock.instant();
    ClaimRequest claim = call.claimRequest(CallSupport.newOwnerToken(), now);
    long askedAt = call.settings.leaseNow(now);
    long askedAtMono = GuardSettings.monoNow();
    Optional<ClaimResult> result;
    try {
      // the SPI takes a positive wait: an inFlightWait of zero waits a millisecond
      java.time.Duration lockWait = call.settings.inFlightWait;
      result =
          transaction.claim(claim, lockWait.isZero() ? java.time.Duration.ofMillis(1) : lockWait);
    } catch (RuntimeException e) {
      throw joinedStoreFailed("claim", e);
    }
    if (result.isEmpty()) {
      throw lockWaitRanOut(System.nanoTime() - startNanos);
    }
    if (result.get() instanceof ClaimResult.Failed failed) {
      throw joinedStoreFailed("claim", failed.error());
    }
    CallSupport.Next<T> next = call.decide(claim, askedAt, askedAtMono, result.get(), null, true);
    if (next instanceof CallSupport.Send<T> send) {
      return sendInTransaction(send.claim());
    } else if (next instanceof CallSupport.Replay<T> replay) {
      return replay.outcome();
    } else if (next instanceof CallSupport.Refuse<T> refuse) {
      throw refuse.error();
    }
    // a committed record in progress: a call of the usual mode is sending it (see the class doc)
    int attempt = ((ClaimResult.Existing) result.get()).record().attempt();
    throw call.inFlightOutsideTransaction(attempt);
  }

  private Outcome<T> sendInTransaction(Claim claim) {
    int attempt = claim.attempt;
    Instant sendStart = call.settings.clock.instant();
    T value;
    try {
      value = callSender(attempt);
    } catch (Throwable failure) {
      onSendFailure(claim, failure, sendNanos(sendStart));
      throw failure;
    }
    long sendNanos = sendNanos(sendStart);
    byte[] payload = call.encode(value, attempt);
    boolean written;
    try {
      written = transaction.complete(call.complete(claim, RecordState.COMPLETED, payload));
    } catch (RuntimeException e) {
      throw joinedStoreFailed("record the outcome of", rollBackNotice(e));
    }
    if (!written) {
      throw joinedStoreFailed("record the outcome of", claimLost(claim, payload));
    }
    call.events.emit(Type.COMPLETED, attempt, sendNanos, null);
    return new Outcome<>(value, false, attempt, true);
  }

  /**
   * A joined claim found the key held by another open transaction for the whole of its wait (the
   * database's lock timeout ran out): nothing was sent.
   */
  private IdempotencyInProgressException lockWaitRanOut(long waitedNanos) {
    call.events.emit(Type.IN_PROGRESS_CONFLICT, 0, waitedNanos, null);
    return IdempotencyInProgressException.afterWaiting(
        call.keyId, java.time.Duration.ofNanos(waitedNanos), null);
  }

  /**
   * A joined call's store work failed: reported as a store error, and thrown as a {@link
   * KeyStoreException} that tells the caller to roll back its transaction.
   */
  private KeyStoreException joinedStoreFailed(String what, Throwable failure) {
    KeyStoreException storeFailure =
        failure instanceof KeyStoreException e
            ? e
            : new KeyStoreException(
                "The key store failed to "
                    + what
                    + " key "
                    + call.keyId
                    + " in the caller's transaction",
                failure);
    call.events.emit(Type.STORE_ERROR, 0, call.events.elapsed(), storeFailure);
    return storeFailure;
  }

  /**
   * The transaction no longer holds the claim: the sender rolled it back, or committed it. A
   * committed claim would stay in progress and be taken over, sending again, after its lease; so
   * the outcome is recorded outside the transaction, fenced by the owner token (a no-op after a
   * rollback), and the call fails either way.
   */
  private KeyStoreException claimLost(Claim claim, byte[] payload) {
    boolean committed;
    try {
      committed =
          transaction.store().complete(call.complete(claim, RecordState.COMPLETED, payload));
    } catch (RuntimeException e) {
      return new KeyStoreException(
          "The caller's transaction no longer holds the claim of key "
              + call.keyId
              + " (was it rolled back or committed inside the sender?), and the outcome could not"
              + " be recorded outside it either; roll the transaction back",
          e);
    }
    String what =
        committed
            ? "the sender committed the caller's transaction, and with it the claim and what it"
                + " had written: the outcome is recorded, so a retry replays it, but a sender must"
                + " not commit or roll back the transaction it joins"
            : "the transaction no longer holds the claim (was it rolled back inside the sender?)";
    return new KeyStoreException(
        "Key " + call.keyId + ": " + what + "; roll the transaction back", null);
  }

  private KeyStoreException rollBackNotice(RuntimeException failure) {
    return new KeyStoreException(
        "The key store could not record the outcome of key "
            + call.keyId
            + " in the caller's transaction; roll the transaction back, so that neither the key"
            + " nor what the sender wrote commits",
        failure);
  }

  private long sendNanos(Instant sendStart) {
    return java.time.Duration.between(sendStart, call.settings.clock.instant()).toNanos();
  }

  /**
   * Runs the sender; only unchecked throwables escape, so callers can rethrow them as they are.
   *
   * <p>The sender gets {@code call.context(attempt)}, whose {@link SendContext#leaseHeld()} is
   * always {@code true}, not the context that checks the claim that {@code execute} and a batch's
   * items get ({@code call.context(Claim)}): the claim is an uncommitted write of the caller's
   * transaction, kept by the transaction's row lock until it commits or rolls back, not by a lease;
   * another call that claims the key waits on that lock and then sees the outcome written in the
   * same transaction (or nothing, after a rollback), so no takeover can happen while the sender
   * runs. Checking the claim would be wrong here: once its lease looked late, the keeper would
   * renew it through the store outside the transaction, which does not see the uncommitted claim
   * (or waits on the caller's own row lock until the store's operation timeout), and the claim
   * would then count as lost while the transaction still holds the key. (A sender that commits the
   * joined transaction itself, which it must not, leaves a claim that can be taken over; {@code
   * claimLost} reports it.)
   */
  private T callSender(int attempt) {
    try (MdcScope mdc = call.mdc(attempt)) {
      return sender.send(call.context(attempt));
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Exception e) {
      throw call.callerException(e);
    }
  }

  /**
   * Stores a permanent failure or deletes the claim, in the transaction. A failure here (the
   * sender's own SQL error may have aborted the transaction) is added to the sender's: the caller
   * rolls back, which removes the claim anyway.
   */
  private void onSendFailure(Claim claim, Throwable thrown, long sendNanos) {
    Throwable failure = CallSupport.senderFailure(thrown);
    try {
      if (call.isPermanent(failure)) {
        CompleteRequest stored =
            call.complete(claim, RecordState.FAILED, call.failurePayload(failure));
        if (transaction.complete(stored)) {
          call.events.emit(Type.FAILURE_STORED, claim.attempt, sendNanos, failure);
          return;
        }
      }
      if (transaction.release(call.keyId, claim.ownerToken)) {
        call.events.emit(Type.RELEASED, claim.attempt, sendNanos, failure);
      }
    } catch (RuntimeException storeFailure) {
      call.events.releaseFailed(storeFailure);
      thrown.addSuppressed(storeFailure);
    }
  }
}
