package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * The decision core of one guarded key, shared by the blocking ({@link GuardedCall}), asynchronous
 * ({@link AsyncGuardedCall}) and batch ({@link Batch}) drivers: the drivers only move bytes and
 * threads, and every choice is made here once.
 *
 * <ol>
 *   <li>{@link #decide} turns what the claim answered into the {@link Next} step: send as the
 *       owner, send without a claim (fail-open), replay, refuse, or wait and claim again;
 *   <li>its {@link SendLease}, {@link #lease}, brackets the sender: whether it may start, lease
 *       renewal, and the report of a sender that outlived its lease;
 *   <li>{@link #encode} and {@link #failurePayload} turn a result or a permanent failure into a
 *       payload the store accepts (never larger than its limit);
 *   <li>{@link #completionBackoffMillis} paces the retries of a fenced write.
 * </ol>
 *
 * What the call reports (events and logs, which name the key only by its digest) goes through its
 * {@link CallEvents}, {@link #events}; what its claims tell the guard's store-outage breaker,
 * through its {@link CallBreaker}, {@link #breaker}.
 *
 * <p>One instance per key and call; not thread-safe except where noted.
 */
final class CallSupport<T> {

  /**
   * A repeat waiting for an in-flight call claims again after 10 ms, then twice as long each time,
   * at most half a second, each pause drawn between half and all of that (jitter), so that many
   * waiting repeats neither poll the store hot nor in step.
   */
  static final long FIRST_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

  static final long MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
  static final long COMPLETION_BACKOFF_MILLIS = 50;
  static final long MAX_COMPLETION_BACKOFF_MILLIS = 1_000;

  /** What a driver does next for its key. */
  sealed interface Next<T> {}

  /** The claim was granted: run the sender as its owner. */
  record Send<T>(Claim claim) implements Next<T> {}

  /** The store failed and the guard fails open: run the sender without a claim. */
  record SendUnclaimed<T>() implements Next<T> {}

  /** The key was sent before: this is its outcome. */
  record Replay<T>(Outcome<T> outcome) implements Next<T> {}

  /** The caller gets this exception; nothing is sent. */
  record Refuse<T>(RuntimeException error) implements Next<T> {}

  /** Another call is sending the key: claim again after this many nanoseconds. */
  record Wait<T>(long nanos) implements Next<T> {}

  final GuardSettings settings;
  final IdempotencyRequest request;
  final ResultCodec<T> codec;
  final String keyId;
  final String fingerprint;

  /** The operation as reported: the request's, or {@code other} past the guard's cap. */
  final String operation;

  private long waitStartNanos;
  private long pollNanos = FIRST_POLL_NANOS;

  /** Whether replays may fill (and be answered from) the guard's near cache. */
  private boolean usesNearCache = true;

  final CallEvents events;

  /** What the call's claims tell the guard's breaker, and its refusals. */
  final CallBreaker breaker;

  /** The lease of the claim around its send. */
  final SendLease lease;

  CallSupport(GuardSettings settings, IdempotencyRequest request, ResultCodec<T> codec) {
    long startNanos = System.nanoTime();
    this.settings = settings;
    this.request = request;
    this.codec = codec;
    this.keyId = Digests.keyId(request.key());
    this.fingerprint = Digests.fingerprint(request.fingerprint());
    this.operation = settings.operations.admit(request.operation());
    this.events = new CallEvents(settings, operation, keyId, startNanos);
    this.lease = new SendLease(settings, keyId, events);
    this.breaker = new CallBreaker(settings, keyId, request.operation(), events);
  }

  /**
   * Puts the call into SLF4J's MDC on this thread while the sender runs ({@link
   * IdempotencyGuard#MDC_KEY}, {@link IdempotencyGuard#MDC_OPERATION}, {@link
   * IdempotencyGuard#MDC_ATTEMPT}), so that the provider client's own log lines can be tied to the
   * call; closing restores what was there.
   */
  MdcScope mdc(int attempt) {
    if (!settings.mdc) {
      return MdcScope.NONE;
    }
    return MdcScope.put(keyId, operation, attempt);
  }

  /** A claim at a given time: a batch claims all its keys at one instant. */
  ClaimRequest claimRequest(String ownerToken, Instant now) {
    return new ClaimRequest(
        keyId,
        ownerToken,
        fingerprint,
        now,
        settings.lease,
        request.ttl(),
        settings.takeoverPolicy == TakeoverPolicy.TAKE_OVER,
        settings.storeRawKeys ? request.key() : null);
  }

  /**
   * Decides what follows a claim.
   *
   * @param claimed the request that was sent
   * @param askedAt {@link GuardSettings#leaseNow()} just before it was sent: the lease runs from no
   *     earlier than that
   * @param askedAtMono the same moment on the monotonic clock
   * @param result what the store answered, or {@code null} if it failed
   * @param error the store's failure, or {@code null}
   * @param mayWait whether a key in flight may be waited for (not in a batch)
   */
  Next<T> decide(
      ClaimRequest claimed,
      long askedAt,
      long askedAtMono,
      ClaimResult result,
      Throwable error,
      boolean mayWait) {
    boolean toldWhereAsked = breaker.takeAnsweredWhereAsked();
    if (error == null && result instanceof ClaimResult.Failed failed) {
      error = failed.error();
    }
    if (error instanceof CallBreaker.CallerGaveUp gaveUp) {
      return new Refuse<>(gaveUp); // the store was not asked: no outage, no fail-open send
    }
    if (error instanceof UnreadableRecordException unreadable) {
      // even fail-open: the key was sent before
      return new Refuse<>(breaker.unreadableRecord(unreadable));
    }
    if (error instanceof ClosedBeforeSendException closed) {
      return new Refuse<>(closed); // the guard gave up on the call, not a store failure: no send
    }
    if (error != null || result == null) {
      KeyStoreException storeFailure = breaker.claimFailed(error);
      if (settings.failsOpen(request.operation())) {
        events.failOpen(storeFailure);
        return new SendUnclaimed<>();
      }
      if (mayHaveReachedTheStore(error)) {
        // the store may still apply it: nothing is sent under it, so take it back, fenced
        settings.pendingOutcomes.unsentClaims.takeBack(keyId, claimed.ownerToken());
      }
      return new Refuse<>(storeFailure);
    }
    if (!toldWhereAsked) {
      settings.outages.storeAnswered();
    }
    if (result instanceof ClaimResult.Claimed granted) {
      if (waitStartNanos != 0) {
        events.emit(Type.WAITED, granted.attempt(), System.nanoTime() - waitStartNanos, null);
      }
      events.claimed(granted);
      return new Send<>(
          new Claim(
              keyId,
              claimed.ownerToken(),
              granted.attempt(),
              askedAt,
              askedAtMono,
              settings.leaseNanos));
    }
    ClaimResult.Existing existing = (ClaimResult.Existing) result;
    try {
      Outcome<T> replayed = resolveExisting(existing);
      if (replayed != null) {
        return new Replay<>(replayed);
      }
    } catch (IdempotencyException refused) {
      return new Refuse<>(refused);
    }
    if (!mayWait) {
      return new Wait<>(0);
    }
    if (waitStartNanos == 0) {
      waitStartNanos = System.nanoTime();
    }
    long remaining = settings.inFlightWait.toNanos() - (System.nanoTime() - waitStartNanos);
    if (remaining <= 0) {
      return new Refuse<>(inProgress(existing.record().attempt(), null));
    }
    long jittered = pollNanos / 2 + ThreadLocalRandom.current().nextLong(pollNanos / 2 + 1);
    long delay = Math.min(jittered, remaining);
    pollNanos = Math.min(pollNanos * 2, MAX_POLL_NANOS);
    return new Wait<>(delay);
  }

  /**
   * Whether a failed claim may have been written all the same: it was sent to the store (not
   * refused by the breaker, nor by an executor that never ran it, nor held back because its caller
   * gave up) and failed without an answer.
   */
  static boolean mayHaveReachedTheStore(Throwable error) {
    return error != null
        && !(error instanceof StoreOutages.Refused)
        && !(error instanceof CallBreaker.CallerGaveUp)
        && !(error instanceof java.util.concurrent.RejectedExecutionException);
  }

  /** The wait for an in-flight call was interrupted: give up as if it timed out. */
  IdempotencyInProgressException interruptedWhileWaiting(InterruptedException interrupt) {
    Thread.currentThread().interrupt();
    return inProgress(0, interrupt);
  }

  /**
   * Reads a record the claim did not win: returns the replayed outcome, throws what the caller must
   * get (key reuse, stored failure, outcome unknown, result unavailable), or returns {@code null}
   * when the record is still in flight.
   */
  private Outcome<T> resolveExisting(ClaimResult.Existing existing) {
    StoredRecord record = existing.record();
    if (!record.fingerprint().equals(fingerprint)) {
      events.emit(Type.KEY_REUSE, record.attempt(), events.elapsed(), null);
      throw new IdempotencyKeyReuseException(keyId);
    }
    if (record.state() == RecordState.IN_PROGRESS) {
      if (existing.leaseExpired()) {
        events.emit(Type.OUTCOME_UNKNOWN, record.attempt(), events.elapsed(), null);
        throw new IdempotencyOutcomeUnknownException(keyId, record.attempt());
      }
      return null;
    }
    if (waitStartNanos != 0) {
      events.emit(Type.WAITED, record.attempt(), System.nanoTime() - waitStartNanos, null);
    }
    return replay(record);
  }

  private Outcome<T> replay(StoredRecord record) {
    if (record.state() == RecordState.FAILED) {
      events.emit(Type.FAILURE_REPLAYED, record.attempt(), events.elapsed(), null);
      throw Payloads.storedFailure(keyId, record.payload());
    }
    events.emit(Type.REPLAYED, record.attempt(), events.elapsed(), null);
    Outcome<T> outcome =
        new Outcome<>(
            Payloads.decode(keyId, record.payload(), codec), true, record.attempt(), true);
    if (settings.nearCache != null && usesNearCache) {
      settings.nearCache.put(keyId, record, settings.clock.instant());
    }
    return outcome;
  }

  /**
   * Keeps this call away from the near cache: a joined call may read its own transaction's
   * uncommitted record, which a rollback takes back, so it neither fills the cache nor answers from
   * it.
   */
  void bypassNearCache() {
    usesNearCache = false;
  }

  /**
   * The outcome the near cache holds for this key, replayed without asking the store; {@code null}
   * when the cache is off, holds nothing for it, or holds it under another fingerprint (then the
   * store decides, and refuses the reuse).
   */
  Outcome<T> nearCacheReplay() {
    if (settings.nearCache == null || !usesNearCache) {
      return null;
    }
    NearCache.Entry entry = settings.nearCache.get(keyId);
    if (entry == null || !entry.fingerprint().equals(fingerprint)) {
      return null;
    }
    events.emit(Type.REPLAYED, entry.attempt(), events.elapsed(), null);
    return new Outcome<>(
        Payloads.decode(keyId, entry.payload(), codec), true, entry.attempt(), true);
  }

  /**
   * A joined claim found the key claimed and in flight in the usual mode: the call answers at once,
   * since waiting would hold the caller's transaction (and, on some databases, a lock on the row
   * that the owner's outcome write needs) open.
   */
  IdempotencyInProgressException inFlightOutsideTransaction(int attempt) {
    return inProgress(attempt, null);
  }

  private IdempotencyInProgressException inProgress(int attempt, Throwable cause) {
    long waitedNanos = waitStartNanos == 0 ? 0 : System.nanoTime() - waitStartNanos;
    events.emit(Type.IN_PROGRESS_CONFLICT, attempt, waitedNanos, cause);
    return IdempotencyInProgressException.afterWaiting(keyId, Duration.ofNanos(waitedNanos), cause);
  }

  SendContext context(int attempt) {
    return SendContext.lazy(request.key(), attempt);
  }

  /**
   * The context of a send under this claim, whose {@link SendContext#leaseHeld()} asks {@link
   * SendLease#readyToSend} again: for a sender that hands its work on and starts it later. An
   * answer {@code false} is remembered on the claim ({@link Claim#answerLeaseHeld}): a result the
   * sender returns after it is not recorded ({@link SendLease#returnedAfterLeaseNotHeld}), so every
   * later answer is {@code false} too, without asking again: a sender that asked again and got
   * {@code true} (a renewal that came late the first time) would send, and its result would not be
   * recorded, and the retry would send again.
   */
  SendContext context(Claim claim) {
    return SendContext.lazy(
        request.key(), claim.attempt, () -> claim.answerLeaseHeld(() -> lease.readyToSend(claim)));
  }

  /**
   * The claim's outcome is written or released: stop renewing it. Safe to call twice. Does nothing
   * while the outcome is written in the background ({@link #recordLater}), which finishes it.
   */
  void finish(Claim claim) {
    if (claim != null && !outcomePending) {
      claim.finish();
      settings.keeper.unwatch(claim);
    }
  }

  /** Whether the outcome was handed to {@link PendingOutcomes}. */
  private volatile boolean outcomePending;

  /**
   * Whether the call's outcome (a permanent failure's, after a failed send) is being written in the
   * background: then a release that failed is not tried again there, so as not to race that write.
   */
  boolean outcomePending() {
    return outcomePending;
  }

  /**
   * The call's own attempts to write its outcome failed: reports it ({@link
   * Type#OUTCOME_NOT_RECORDED}, SPEC 6) and hands the write to the guard's {@link PendingOutcomes},
   * which goes on trying while the lease holds; the claim stays watched by the lease keeper until
   * then.
   */
  void recordLater(Claim claim, RecordState state, byte[] payload, Throwable lastFailure) {
    outcomePending = settings.pendingOutcomes.adopt(this, claim, state, payload);
    events.notRecorded(claim.attempt, lastFailure, outcomePending);
  }

  /** The background write of {@link #recordLater} ended: stop renewing the claim. */
  void finishPending(Claim claim) {
    claim.finish();
    settings.keeper.unwatch(claim);
  }

  /** The payload of a result: the encoded value, or "sent, result not stored" with the reason. */
  byte[] encode(T value, int attempt) {
    if (value == null) {
      return Payloads.nullResult();
    }
    int limit = settings.store.maxPayloadBytes();
    byte[] encoded;
    try {
      encoded = codec.encode(value);
      if (encoded == null) {
        throw new IllegalStateException("the codec returned null");
      }
    } catch (Exception e) {
      events.resultNotEncoded(attempt, e);
      return Payloads.notStored(
          "the result could not be encoded (" + e.getClass().getName() + ")", limit);
    }
    if (encoded.length + 1 > limit) {
      events.resultTooLarge(attempt, encoded.length, limit);
      return Payloads.notStored(
          "the result of " + encoded.length + " bytes exceeds the store's limit of " + limit,
          limit);
    }
    return Payloads.value(encoded);
  }

  /** The payload of a permanent failure, cut to what the store accepts. */
  byte[] failurePayload(Throwable failure) {
    return Payloads.failure(failure, settings.store.maxPayloadBytes());
  }

  CompleteRequest complete(Claim claim, RecordState state, byte[] payload) {
    return new CompleteRequest(keyId, claim.ownerToken, state, payload, settings.clock.instant());
  }

  /** The pause before write attempt {@code round + 1}: doubling from 50 ms, at most a second. */
  static long completionBackoffMillis(int round) {
    return Math.min(
        MAX_COMPLETION_BACKOFF_MILLIS, COMPLETION_BACKOFF_MILLIS << Math.min(round - 1, 20));
  }

  /** The sender's own failure: unwrapped from SendFailedException. */
  static Throwable senderFailure(Throwable thrown) {
    return thrown instanceof SendFailedException && thrown.getCause() != null
        ? thrown.getCause()
        : thrown;
  }

  /** What the caller gets for a sender's failure: unchecked as is, checked wrapped. */
  RuntimeException callerException(Throwable failure) {
    if (failure instanceof RuntimeException runtime) {
      return runtime;
    }
    if (failure instanceof Error error) {
      throw error;
    }
    if (failure instanceof InterruptedException) {
      Thread.currentThread().interrupt();
    }
    return new SendFailedException(keyId, failure);
  }

  boolean isPermanent(Throwable failure) {
    if (failure instanceof Error) {
      return false;
    }
    try {
      return settings.failureClassifier.isPermanent(failure);
    } catch (RuntimeException e) {
      CallEvents.log.warn("The FailureClassifier threw; treating the failure as transient", e);
      return false;
    }
  }

  /**
   * A random owner token. Fencing needs tokens that never repeat for one key, not secrecy: 128 bits
   * from {@link ThreadLocalRandom} are unique in practice and, unlike {@code SecureRandom}, do not
   * contend between threads.
   */
  static String newOwnerToken() {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    byte[] bytes = new byte[16];
    random.nextBytes(bytes);
    return TOKEN_ENCODER.encodeToString(bytes); // 22 characters, as compact as a record allows
  }

  private static final Base64.Encoder TOKEN_ENCODER = Base64.getUrlEncoder().withoutPadding();
}
