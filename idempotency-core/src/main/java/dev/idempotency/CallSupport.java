package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the blocking, asynchronous and batch paths of one guarded key share: the key's digests, the
 * claim request, the reading of an existing record, encoding, failure classification, events and
 * logs. One instance per key and call.
 */
final class CallSupport<T> {

  static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);
  static final long FIRST_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  static final long MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
  static final long COMPLETION_BACKOFF_MILLIS = 50;

  record Settings(
      KeyStore store,
      Duration lease,
      Duration inFlightWait,
      Clock clock,
      TakeoverPolicy takeoverPolicy,
      FailureClassifier failureClassifier,
      boolean failOpen,
      int completionAttempts,
      boolean storeRawKeys,
      Listeners listeners,
      Executor blockingStoreExecutor) {}

  final Settings settings;
  final IdempotencyRequest request;
  final ResultCodec<T> codec;
  final String keyId;
  final String fingerprint;
  final long startNanos = System.nanoTime();

  CallSupport(Settings settings, IdempotencyRequest request, ResultCodec<T> codec) {
    this.settings = settings;
    this.request = request;
    this.codec = codec;
    this.keyId = Digests.keyId(request.key());
    this.fingerprint = Digests.fingerprint(request.fingerprint());
  }

  ClaimRequest claimRequest(String ownerToken) {
    return claimRequest(ownerToken, settings.clock().instant());
  }

  /** A claim at a given time: a batch claims all its keys at one instant. */
  ClaimRequest claimRequest(String ownerToken, Instant now) {
    return new ClaimRequest(
        keyId,
        ownerToken,
        fingerprint,
        now,
        settings.lease(),
        request.ttl(),
        settings.takeoverPolicy() == TakeoverPolicy.TAKE_OVER,
        settings.storeRawKeys() ? request.key() : null);
  }

  SendContext context(int attempt) {
    return SendContext.lazy(request.key(), attempt);
  }

  /** A store failure before the claim, as the exception the caller sees. Emits STORE_ERROR. */
  KeyStoreException claimFailed(Throwable failure) {
    KeyStoreException storeFailure =
        failure instanceof KeyStoreException e
            ? e
            : new KeyStoreException("The key store failed to claim key " + keyId, failure);
    emit(Type.STORE_ERROR, 0, elapsed(), storeFailure);
    return storeFailure;
  }

  void reportFailOpen(KeyStoreException storeFailure) {
    log.warn(
        "Key store unavailable; fail-open mode sends key {} without a claim (a duplicate is"
            + " possible)",
        keyId,
        storeFailure);
    emit(Type.FAIL_OPEN_SEND, 1, elapsed(), storeFailure);
  }

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
   * when the record is still in flight and the caller may wait.
   */
  Outcome<T> resolveExisting(ClaimResult.Existing existing, long waitStartNanos) {
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
    byte[] payload = record.payload();
    if (record.state() == RecordState.FAILED) {
      emit(Type.FAILURE_REPLAYED, record.attempt(), elapsed(), null);
      String text = Payloads.tag(payload) == Payloads.FAILURE ? Payloads.text(payload) : "\n";
      int newline = text.indexOf('\n');
      String type = newline < 0 ? text : text.substring(0, newline);
      String message = newline < 0 ? "" : text.substring(newline + 1);
      throw new IdempotencyStoredFailureException(keyId, type, message);
    }
    emit(Type.REPLAYED, record.attempt(), elapsed(), null);
    switch (Payloads.tag(payload)) {
      case Payloads.NULL_RESULT:
        return new Outcome<>(null, true, record.attempt(), true);
      case Payloads.VALUE:
        try {
          return new Outcome<>(codec.decode(Payloads.body(payload)), true, record.attempt(), true);
        } catch (Exception e) {
          throw new IdempotencyResultUnavailableException(
              keyId,
              "the stored result could not be decoded by "
                  + codec.getClass().getName()
                  + "; did the result type change?",
              e);
        }
      case Payloads.NOT_STORED:
        throw new IdempotencyResultUnavailableException(keyId, Payloads.text(payload), null);
      default:
        throw new IdempotencyResultUnavailableException(
            keyId, "the stored payload has an unknown format", null);
    }
  }

  /** Remaining wait, or zero or less when the caller must give up. */
  long remainingWaitNanos(long waitStartNanos) {
    return settings.inFlightWait().toNanos() - (System.nanoTime() - waitStartNanos);
  }

  IdempotencyInProgressException inProgress(int attempt, long waitedNanos, Throwable cause) {
    emit(Type.IN_PROGRESS_CONFLICT, attempt, waitedNanos, cause);
    return IdempotencyInProgressException.afterWaiting(keyId, Duration.ofNanos(waitedNanos), cause);
  }

  /** Reports a sender that outlived its lease, measured on the guard's clock like the lease. */
  long sendFinished(Instant sendStart, int attempt) {
    long sendNanos = Duration.between(sendStart, settings.clock().instant()).toNanos();
    if (sendNanos > settings.lease().toNanos()) {
      log.warn(
          "The sender for key {} ran {} ms, longer than its lease of {} ms; another caller may"
              + " have taken the key over. Raise the lease above the slowest send",
          keyId,
          TimeUnit.NANOSECONDS.toMillis(sendNanos),
          settings.lease().toMillis());
      emit(Type.LEASE_OVERRUN, attempt, sendNanos, null);
    }
    return sendNanos;
  }

  byte[] encode(T value, int attempt) {
    if (value == null) {
      return Payloads.nullResult();
    }
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
      return Payloads.notStored("the result could not be encoded (" + e.getClass().getName() + ")");
    }
    int limit = settings.store().maxPayloadBytes();
    if (encoded.length + 1 > limit) {
      log.warn(
          "The result for key {} is {} bytes, over the store's limit of {}; recording the send"
              + " without a result",
          keyId,
          encoded.length,
          limit);
      emit(Type.RESULT_NOT_STORED, attempt, elapsed(), null);
      return Payloads.notStored(
          "the result of " + encoded.length + " bytes exceeds the store's limit of " + limit);
    }
    return Payloads.value(encoded);
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
      return settings.failureClassifier().isPermanent(failure);
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
          settings.completionAttempts(),
          lastFailure);
    }
    emit(Type.OUTCOME_NOT_RECORDED, attempt, elapsed(), lastFailure);
  }

  long elapsed() {
    return System.nanoTime() - startNanos;
  }

  void emit(Type type, int attempt, long nanos, Throwable error) {
    if (log.isDebugEnabled()) {
      log.debug("{} key={} attempt={}", type, keyId, attempt);
    }
    settings.listeners().emit(type, keyId, attempt, nanos, error);
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
