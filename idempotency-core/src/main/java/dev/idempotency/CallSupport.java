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
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The decision core of one guarded key, shared by the blocking ({@link GuardedCall}), asynchronous
 * ({@link AsyncGuardedCall}) and batch ({@link Batch}) drivers: the drivers only move bytes and
 * threads, and every choice is made here once.
 *
 * <ol>
 *   <li>{@link #decide} turns what the claim answered into the {@link Next} step: send as the
 *       owner, send without a claim (fail-open), replay, refuse, or wait and claim again;
 *   <li>{@link #startSend} and {@link #sendFinished} bracket the sender: lease renewal, and the
 *       report of a sender that outlived its lease;
 *   <li>{@link #encode} and {@link #failurePayload} turn a result or a permanent failure into a
 *       payload the store accepts (never larger than its limit);
 *   <li>{@link #completionBackoffMillis} paces the retries of a fenced write;
 *   <li>events and logs, which name the key only by its digest.
 * </ol>
 *
 * One instance per key and call; not thread-safe except where noted.
 */
final class CallSupport<T> {

  static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);
  static final long FIRST_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  static final long MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
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
  final long startNanos = System.nanoTime();
  private long waitStartNanos;
  private long pollNanos = FIRST_POLL_NANOS;
  private IdempotencyObserver.CallObservation observation =
      IdempotencyObserver.CallObservation.NONE;

  CallSupport(GuardSettings settings, IdempotencyRequest request, ResultCodec<T> codec) {
    this.settings = settings;
    this.request = request;
    this.codec = codec;
    this.keyId = Digests.keyId(request.key());
    this.fingerprint = Digests.fingerprint(request.fingerprint());
  }

  /** The call starts: the observers follow it from here (for execute and executeAsync). */
  IdempotencyObserver.CallObservation startObservation() {
    observation = settings.observers.onCallStart(request.operation(), settings.store.kind());
    return observation;
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
    return MdcScope.put(keyId, request.operation(), attempt);
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
   * @param result what the store answered, or {@code null} if it failed
   * @param error the store's failure, or {@code null}
   * @param mayWait whether a key in flight may be waited for (not in a batch)
   */
  Next<T> decide(
      ClaimRequest claimed, long askedAt, ClaimResult result, Throwable error, boolean mayWait) {
    if (error == null && result instanceof ClaimResult.Failed failed) {
      error = failed.error();
    }
    if (error != null || result == null) {
      KeyStoreException storeFailure = claimFailed(error);
      if (settings.failOpen) {
        reportFailOpen(storeFailure);
        return new SendUnclaimed<>();
      }
      return new Refuse<>(storeFailure);
    }
    if (result instanceof ClaimResult.Claimed granted) {
      if (waitStartNanos != 0) {
        emit(Type.WAITED, granted.attempt(), System.nanoTime() - waitStartNanos, null);
      }
      reportClaimed(granted);
      return new Send<>(
          new Claim(keyId, claimed.ownerToken(), granted.attempt(), askedAt, settings.leaseNanos));
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
    long delay = Math.min(pollNanos, remaining);
    pollNanos = Math.min(pollNanos * 2, MAX_POLL_NANOS);
    return new Wait<>(delay);
  }

  /** The wait for an in-flight call was interrupted: give up as if it timed out. */
  IdempotencyInProgressException interruptedWhileWaiting(InterruptedException interrupt) {
    Thread.currentThread().interrupt();
    return inProgress(0, interrupt);
  }

  private KeyStoreException claimFailed(Throwable failure) {
    KeyStoreException storeFailure =
        failure instanceof KeyStoreException e
            ? e
            : new KeyStoreException("The key store failed to claim key " + keyId, failure);
    emit(Type.STORE_ERROR, 0, elapsed(), storeFailure);
    return storeFailure;
  }

  private void reportFailOpen(KeyStoreException storeFailure) {
    log.warn(
        "Key store unavailable; fail-open mode sends key {} without a claim (a duplicate is"
            + " possible)",
        keyId,
        storeFailure);
    emit(Type.FAIL_OPEN_SEND, 1, elapsed(), storeFailure);
  }

  /** Reports a granted claim: a first claim, or a takeover of an expired lease. */
  void reportClaimed(ClaimResult.Claimed claimed) {
    if (claimed.takeover()) {
      log.warn(
          "Took over key {} at attempt {}: the previous attempt outlived its lease without an"
              + " outcome and may have sent; the provider key lets the provider absorb a duplicate",
          keyId,
          claimed.attempt());
      emit(Type.TAKEOVER, claimed.attempt(), elapsed(), null);
    } else {
      emit(Type.CLAIMED, claimed.attempt(), elapsed(), null);
    }
  }

  /**
   * Reads a record the claim did not win: returns the replayed outcome, throws what the caller must
   * get (key reuse, stored failure, outcome unknown, result unavailable), or returns {@code null}
   * when the record is still in flight.
   */
  private Outcome<T> resolveExisting(ClaimResult.Existing existing) {
    StoredRecord record = existing.record();
    if (!record.fingerprint().equals(fingerprint)) {
      emit(Type.KEY_REUSE, record.attempt(), elapsed(), null);
      throw new IdempotencyKeyReuseException(keyId);
    }
    if (record.state() == RecordState.IN_PROGRESS) {
      if (existing.leaseExpired()) {
        emit(Type.OUTCOME_UNKNOWN, record.attempt(), elapsed(), null);
        throw new IdempotencyOutcomeUnknownException(keyId, record.attempt());
      }
      return null;
    }
    if (waitStartNanos != 0) {
      emit(Type.WAITED, record.attempt(), System.nanoTime() - waitStartNanos, null);
    }
    return replay(record);
  }

  private Outcome<T> replay(StoredRecord record) {
    if (record.state() == RecordState.FAILED) {
      emit(Type.FAILURE_REPLAYED, record.attempt(), elapsed(), null);
      throw Payloads.storedFailure(keyId, record.payload());
    }
    emit(Type.REPLAYED, record.attempt(), elapsed(), null);
    return new Outcome<>(
        Payloads.decode(keyId, record.payload(), codec), true, record.attempt(), true);
  }

  private IdempotencyInProgressException inProgress(int attempt, Throwable cause) {
    long waitedNanos = waitStartNanos == 0 ? 0 : System.nanoTime() - waitStartNanos;
    emit(Type.IN_PROGRESS_CONFLICT, attempt, waitedNanos, cause);
    return IdempotencyInProgressException.afterWaiting(keyId, Duration.ofNanos(waitedNanos), cause);
  }

  SendContext context(int attempt) {
    return SendContext.lazy(request.key(), attempt);
  }

  /**
   * Whether the sender may run under this claim. A claim the store answered after more than half
   * its lease (a slow or stalled store) is renewed first, fenced, on the calling thread: the keeper
   * renews only every quarter lease, so a send started on the little that is left could outlive it
   * before the first renewal and be taken over while it runs. False if the renewal failed or the
   * key is no longer ours: then nothing may be sent (see {@link #lateClaimRefused}).
   */
  boolean readyToSend(Claim claim) {
    return !isLate(claim) || renewLate(claim);
  }

  /** Whether the store answered this claim after more than half its lease (renewal on). */
  boolean isLate(Claim claim) {
    return settings.keeper.isLate(claim, settings.leaseNow());
  }

  /** Renews a late claim now (blocking store work); whether it is still ours with a lease. */
  boolean renewLate(Claim claim) {
    settings.keeper.renewLate(List.of(claim));
    return !claim.lapsedBy(settings.leaseNow());
  }

  /** The failure of a call whose late claim could not be renewed: nothing was sent. */
  KeyStoreException lateClaimRefused(Claim claim) {
    KeyStoreException refused =
        new KeyStoreException(
            "The key store answered the claim of key "
                + keyId
                + " after more than half its lease of "
                + settings.lease.toMillis()
                + " ms and the lease could not be renewed; nothing was sent",
            null);
    emit(Type.STORE_ERROR, claim.attempt, elapsed(), refused);
    return refused;
  }

  /**
   * The sender is about to run under this claim: the keeper renews its lease from now on, up to the
   * renewal limit, unless renewal is off.
   */
  void startSend(Claim claim) {
    if (settings.leaseRenewal) {
      claim.renewUntil(settings.leaseNow() + settings.leaseRenewalLimitNanos);
      settings.keeper.watch(claim);
    }
  }

  /** The claim's outcome is written or released: stop renewing it. Safe to call twice. */
  void finish(Claim claim) {
    if (claim != null) {
      claim.finish();
      settings.keeper.unwatch(claim);
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
      log.warn(
          "The sender for key {} ran {} ms and its lease of {} ms ran out{}; another caller may"
              + " have taken the key over. Raise the lease, or the renewal limit",
          keyId,
          TimeUnit.NANOSECONDS.toMillis(sendNanos),
          settings.lease.toMillis(),
          settings.leaseRenewal ? " (renewal failed or reached its limit)" : "");
      emit(Type.LEASE_OVERRUN, claim.attempt, sendNanos, null);
    }
    return sendNanos;
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
      log.warn(
          "The result for key {} could not be encoded; recording the send without a result",
          keyId,
          e);
      emit(Type.RESULT_NOT_STORED, attempt, elapsed(), e);
      return Payloads.notStored(
          "the result could not be encoded (" + e.getClass().getName() + ")", limit);
    }
    if (encoded.length + 1 > limit) {
      log.warn(
          "The result for key {} is {} bytes, over the store's limit of {}; recording the send"
              + " without a result",
          keyId,
          encoded.length,
          limit);
      emit(Type.RESULT_NOT_STORED, attempt, elapsed(), null);
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

  /** Sleeps between write attempts; {@code false} (interrupt flag kept) if interrupted. */
  static boolean pause(long millis) {
    try {
      Thread.sleep(millis);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
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
      log.warn("The FailureClassifier threw; treating the failure as transient", e);
      return false;
    }
  }

  void reportNotRecorded(int attempt, Throwable lastFailure) {
    if (lastFailure == null) {
      log.warn(
          "Key {} was taken over while attempt {} was sending; its outcome is not recorded",
          keyId,
          attempt);
    } else {
      log.warn(
          "Sent key {} but could not record the outcome after {} attempts; a repeat after the"
              + " lease may send again",
          keyId,
          settings.completionAttempts,
          lastFailure);
    }
    emit(Type.OUTCOME_NOT_RECORDED, attempt, elapsed(), lastFailure);
  }

  void reportReleaseFailed(Throwable storeFailure) {
    log.warn(
        "Could not release key {} after a failed send; it frees itself when the lease ends",
        keyId,
        storeFailure);
  }

  long elapsed() {
    return System.nanoTime() - startNanos;
  }

  void emit(Type type, int attempt, long nanos, Throwable error) {
    if (log.isDebugEnabled()) {
      log.debug("{} operation={} key={} attempt={}", type, request.operation(), keyId, attempt);
    }
    if (settings.listeners.wanted() || observation != IdempotencyObserver.CallObservation.NONE) {
      IdempotencyEvent event =
          Listeners.event(type, request.operation(), keyId, attempt, nanos, error);
      settings.listeners.deliver(event);
      observation.onEvent(event);
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
