package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import java.time.Duration;
import java.time.Instant;

/**
 * The lease of one call's claim around its send, for the blocking ({@link GuardedCall}) and
 * asynchronous ({@link AsyncGuardedCall}) drivers: whether the sender may start under the claim
 * (renewing it first if the store answered late), the refusal when it may not, renewal while the
 * sender runs, and the report of a sender that outlived its lease.
 *
 * <p>One instance per key and call, made by its {@link CallSupport}; not thread-safe except where
 * the methods say so.
 */
final class SendLease {

  private final GuardSettings settings;
  private final String keyId;
  private final CallEvents events;

  SendLease(GuardSettings settings, String keyId, CallEvents events) {
    this.settings = settings;
    this.keyId = keyId;
    this.events = events;
  }

  /**
   * Whether the sender may run under this claim: never with less than the keeper's margin (a
   * quarter lease) left. A claim the store answered after more than half its lease, or with less
   * than the margin left, is renewed first, fenced, on the calling thread (see {@link
   * LeaseKeeper#readyToSend}). False if it still has less: then nothing may be sent (see {@link
   * #lateClaimRefused}).
   */
  boolean readyToSend(Claim claim) {
    // a guard closed past its grace period renews nothing: a send started now could outlive its
    // lease and be taken over, which a crash, the only other way to leave it, never would
    return !settings.gaveUp() && settings.keeper.readyToSend(claim);
  }

  /** Whether {@link #readyToSend} would do store work (a renewal) before answering. */
  boolean needsRenewalBeforeSend(Claim claim) {
    return settings.leaseRenewal
        && (settings.keeper.isLate(claim)
            || !claim.isLive(settings.leaseNow(), settings.keeper.marginNanos));
  }

  /**
   * The failure of a call whose claim had too little lease left to send on, even renewed: nothing
   * was sent. The claim is taken back if it is still ours (fenced, see {@link #releaseUnsent}), so
   * that a retry need not wait for it to run out: a first attempt is deleted (the retry is no
   * takeover, since nothing was sent), a takeover's lease is cut (the retry takes over, since the
   * owner before it may have sent) and its owner token ended, so that a renewal of it still in
   * flight is refused by the store and cannot revive the claim, whatever the order.
   */
  KeyStoreException lateClaimRefused(Claim claim) {
    boolean lost = claim.isLost();
    if (!lost) {
      takeBackNow(claim.ownerToken);
    }
    claim.finish();
    if (settings.gaveUp()) {
      return closedBeforeSend(claim.attempt);
    }
    KeyStoreException refused =
        new KeyStoreException(
            "The key store answered the claim of key "
                + keyId
                + " late, and "
                + (lost
                    ? "its lease could not be renewed"
                    : !settings.leaseRenewal
                        ? "its lease of "
                            + settings.lease.toMillis()
                            + " ms had run out (lease renewal is off)"
                        : "even renewed, less than a quarter of its lease of "
                            + settings.lease.toMillis()
                            + " ms was left to send on")
                + "; nothing was sent",
            null);
    events.emit(Type.STORE_ERROR, claim.attempt, events.elapsed(), refused);
    return refused;
  }

  /**
   * The failure of a call whose sender returned normally after its {@link SendContext#leaseHeld()}
   * check had answered {@code false}: by that method's contract nothing was sent, so the result is
   * not recorded as the key's outcome (repeats would replay it, and the message would never go
   * out). Nothing more may be sent on the claim ({@link Claim#giveUp()}), and it is taken back,
   * fenced, on this thread ({@link dev.idempotency.spi.KeyStore#takeBack}, tried again in the
   * background if it fails): a first attempt is deleted, so that a retry sends once; a takeover's
   * lease is cut; a key another call has taken over meanwhile is left to it.
   */
  KeyStoreException returnedAfterLeaseNotHeld(Claim claim) {
    claim.giveUp();
    takeBackNow(claim.ownerToken);
    claim.finish();
    if (settings.gaveUp()) {
      return closedBeforeSend(claim.attempt);
    }
    KeyStoreException notSent =
        new KeyStoreException(
            "The sender of key "
                + keyId
                + " was told its lease was not held (SendContext.leaseHeld() answered false: the"
                + " store failed or refused to renew it, or too little of it was left) and returned"
                + " normally, so nothing was sent; its result was not recorded and the key was"
                + " released for a retry",
            null);
    events.emit(Type.STORE_ERROR, claim.attempt, events.elapsed(), notSent);
    return notSent;
  }

  /**
   * The failure of a call that the guard, closed past its grace period, gave up on before its send
   * could start: nothing was sent. Reported as a {@link Type#STORE_ERROR}.
   *
   * @param attempt the attempt of the claim it held, or 0 if it held none
   */
  ClosedBeforeSendException closedBeforeSend(int attempt) {
    ClosedBeforeSendException closed = new ClosedBeforeSendException(keyId);
    events.emit(Type.STORE_ERROR, attempt, events.elapsed(), closed);
    return closed;
  }

  /**
   * A claim granted to a call that cannot go on to its send (the guard gave up on it, or an
   * executor refused a step towards the send: one the guard stopped at close, or the
   * application's): taken back at once with one fenced {@link
   * dev.idempotency.spi.KeyStore#takeBack} (the store call of {@link UnsentClaims}, which tries
   * again if it fails), on this thread for a store whose calls block (the thread holding the claim
   * is then one that may block: a thread of the store's executor or of the guard's async pool),
   * else without waiting. Nothing was sent, so a retry need not wait for its lease to run out; a
   * takeover's record keeps its attempt, since the owner before it may have sent.
   *
   * @param ownerToken the claim's owner token
   */
  void releaseUnsent(String ownerToken) {
    if (AsyncStores.queuesCalls(settings.asyncStore)) {
      takeBackNow(ownerToken);
      return;
    }
    try {
      settings
          .asyncStore
          .takeBackAsync(keyId, ownerToken, settings.clock.instant())
          .whenComplete(
              (takenBack, failure) -> {
                if (failure != null) {
                  takeBackFailed(ownerToken, failure);
                }
              });
    } catch (RuntimeException e) {
      takeBackFailed(ownerToken, e);
    }
  }

  /** One fenced take-back on this thread, the interrupt flag deferred; retried if it fails. */
  private void takeBackNow(String ownerToken) {
    try {
      Interrupts.deferredDuring(
          () -> settings.store.takeBack(keyId, ownerToken, settings.clock.instant()));
    } catch (RuntimeException e) {
      takeBackFailed(ownerToken, e);
    }
  }

  /** A take-back of a claim nothing was sent under failed: the background take-back tries again. */
  private void takeBackFailed(String ownerToken, Throwable failure) {
    CallEvents.log.debug(
        "Could not take back key {} whose send never started; trying again later", keyId, failure);
    settings.pendingOutcomes.unsentClaims.takeBack(keyId, ownerToken);
  }

  /**
   * The sender is about to run under this claim: the keeper renews its lease from now on, up to the
   * renewal limit, unless renewal is off.
   */
  void startSend(Claim claim) {
    if (settings.leaseRenewal) {
      claim.renewUntil(GuardSettings.monoNow() + settings.leaseRenewalLimitNanos);
      settings.keeper.watch(claim);
    }
  }

  /**
   * A claim found {@link #readyToSend} whose send does not start on this thread (it waits for a
   * thread of the call's executor): the keeper renews its lease from now on, as {@link #startSend}
   * does, so that the wait cannot outlast the lease unrenewed. The send must still ask {@link
   * #readyToSend} (or {@link #needsRenewalBeforeSend}) again before it starts: a renewal the store
   * refused meanwhile marks the claim lost. The renewal limit counts from the first such hand-off,
   * not again from each: a send that waits longer than the limit for threads is not renewed past it
   * (then refused, nothing sent, unless what is left of its lease still lets it start).
   */
  void keepUntilSend(Claim claim) {
    if (settings.leaseRenewal) {
      claim.renewAtMostUntil(GuardSettings.monoNow() + settings.leaseRenewalLimitNanos);
      settings.keeper.watch(claim);
    }
  }

  /**
   * The sender returned or threw: reports {@link Type#LEASE_OVERRUN} if the lease ran out (or was
   * lost) while it ran, so that another caller may have taken the key over.
   *
   * @param claim the claim, or {@code null} for a fail-open send
   * @return the sender's time in nanoseconds, on the guard's clock
   */
  long sendFinished(Claim claim, Instant sendStart) {
    long sendNanos = Duration.between(sendStart, settings.clock.instant()).toNanos();
    if (claim != null && claim.lapsedBy(settings.leaseNow())) {
      events.leaseOverrun(claim.attempt, sendNanos);
    }
    return sendNanos;
  }
}
