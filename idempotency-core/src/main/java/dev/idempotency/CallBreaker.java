package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimResult;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * What one call's claims tell the guard's store-outage breaker ({@link StoreOutages}), and what the
 * breaker answers them, for {@link CallSupport}:
 *
 * <ol>
 *   <li>before a claim is sent, {@link #refusal}: the breaker's refusal, none for a fail-open call,
 *       or the call's own once its caller gave up ({@link #callerGaveUp});
 *   <li>on the thread that asked the store (a blocking store's executor), {@link
 *       #claimFailedWhereAsked} and {@link #claimAnsweredWhereAsked} tell the breaker there and
 *       then;
 *   <li>when {@link CallSupport#decide} decides, {@link #claimFailed} and {@link
 *       #takeAnsweredWhereAsked} see that what was told already is not told again.
 * </ol>
 *
 * <p>One instance per call; its flags are read across the threads of an async call.
 */
final class CallBreaker {

  private final GuardSettings settings;
  private final String keyId;
  private final String operation;
  private final CallEvents events;

  /** A claim failure already told to the breaker ({@link #claimFailedWhereAsked}). */
  private volatile KeyStoreException reportedWhereAsked;

  /** Whether the breaker was told of the last claim's answer ({@link #claimAnsweredWhereAsked}). */
  private volatile boolean answeredWhereAsked;

  /** Whether the caller of an async call gave up on its stage ({@link CallerStage}). */
  private volatile boolean callerGaveUp;

  /** For the call of {@code keyId}; {@code operation} is the request's, as fail-open reads it. */
  CallBreaker(GuardSettings settings, String keyId, String operation, CallEvents events) {
    this.settings = settings;
    this.keyId = keyId;
    this.operation = operation;
    this.events = events;
  }

  /**
   * Whether the breaker was told of the last claim's answer where the store was asked; clears it
   * for the next claim.
   */
  boolean takeAnsweredWhereAsked() {
    boolean told = answeredWhereAsked;
    answeredWhereAsked = false;
    return told;
  }

  /**
   * A claim failed: tells the breaker unless {@link #claimFailedWhereAsked} did, and reports it.
   *
   * @return the failure as a store failure
   */
  KeyStoreException claimFailed(Throwable failure) {
    KeyStoreException storeFailure = asStoreFailure(failure);
    if (storeFailure != reportedWhereAsked) {
      reportToBreaker(storeFailure);
    }
    events.emit(Type.STORE_ERROR, 0, events.elapsed(), storeFailure);
    return storeFailure;
  }

  /**
   * A claim failed on the thread that asked the store (a blocking store's executor): tells the
   * breaker there and then, before the thread takes its next queued claim, which is then refused
   * rather than sent to the failing store; {@link CallSupport#decide} does not count it again.
   *
   * @return the failure for {@link CallSupport#decide}
   */
  RuntimeException claimFailedWhereAsked(RuntimeException failure) {
    if (failure instanceof UnreadableRecordException) {
      return failure; // the store answered: that key's error, decided later
    }
    KeyStoreException storeFailure = asStoreFailure(failure);
    reportedWhereAsked = storeFailure;
    reportToBreaker(storeFailure);
    return storeFailure;
  }

  /**
   * The store answered a claim on the thread that asked it: tells the breaker there and then (a
   * trial's answer lets the next queued claim in), as {@link #claimFailedWhereAsked} does for a
   * failure; {@link CallSupport#decide} does not tell it again. A {@link ClaimResult.Failed} is
   * left to {@link CallSupport#decide}.
   *
   * @return {@code answer}
   */
  ClaimResult claimAnsweredWhereAsked(ClaimResult answer) {
    if (!(answer instanceof ClaimResult.Failed)) {
      answeredWhereAsked = true;
      settings.outages.storeAnswered();
    }
    return answer;
  }

  private KeyStoreException asStoreFailure(Throwable failure) {
    return failure instanceof KeyStoreException e
        ? e
        : new KeyStoreException("The key store failed to claim key " + keyId, failure);
  }

  private void reportToBreaker(KeyStoreException storeFailure) {
    if (Thread.currentThread().isInterrupted()) {
      // a wait the application interrupted (a pool gives up on it) says nothing of the store
      settings.outages.claimAbandoned();
    } else {
      settings.outages.storeFailed("a claim failed", storeFailure);
    }
  }

  /**
   * The store answered the claim, but holds a record for this key that it cannot read: that key's
   * error, never an outage (the breaker stays closed, or closes, for every other key), and never a
   * send, fail-open or not, since the record may be a completed send.
   */
  UnreadableRecordException unreadableRecord(UnreadableRecordException unreadable) {
    settings.outages.storeAnswered();
    UnreadableRecordException refused =
        new UnreadableRecordException(
            "The key store holds a record for key "
                + keyId
                + " that it cannot read ("
                + unreadable.getMessage()
                + "); nothing was sent for this key, and its calls are refused until the record is"
                + " repaired or deleted in the store; other keys are not affected",
            unreadable);
    events.emit(Type.STORE_ERROR, 0, events.elapsed(), refused);
    return refused;
  }

  /**
   * The breaker's refusal for a new claim of this call ({@link StoreOutages#refusal()}), or {@code
   * null} to ask the store. A fail-open call always asks: refused without asking, it would send a
   * key the store, answering again, would have replayed.
   */
  @Nullable KeyStoreException refusal() {
    return refusal(settings.outages::refusal);
  }

  /**
   * The breaker's refusal for a claim about to be queued on a blocking store's executor ({@link
   * StoreOutages#refusalBeforeQueueing()}), which asks {@link #refusal()} when it starts.
   */
  @Nullable KeyStoreException refusalBeforeQueueing() {
    return refusal(settings.outages::refusalBeforeQueueing);
  }

  private @Nullable KeyStoreException refusal(Supplier<KeyStoreException> breaker) {
    if (callerGaveUp) {
      return new CallerGaveUp(keyId);
    }
    return settings.failsOpen(operation) ? null : breaker.get();
  }

  /**
   * The caller of this async call cancelled or completed its stage itself: a claim not yet sent
   * (queued for a blocking store's executor, or a repeat's next poll) is not sent at all.
   */
  void callerGaveUp() {
    callerGaveUp = true;
  }

  /**
   * A claim not sent because the caller had given up on the call: nothing was claimed or sent, and
   * the store was not asked (no outage, no fail-open send).
   */
  static final class CallerGaveUp extends KeyStoreException {
    CallerGaveUp(String keyId) {
      super(
          "The caller gave up on the call of key "
              + keyId
              + " before its claim was sent to the store: nothing was claimed or sent",
          null);
    }
  }
}
