package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One run of {@link IdempotencyGuard#executeForOutcome}:
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

  private static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final long FIRST_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  private static final long MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
  private static final long COMPLETION_BACKOFF_MILLIS = 50;

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
      Listeners listeners) {}

  private final Settings settings;
  private final IdempotencyRequest request;
  private final ResultCodec<T> codec;
  private final Sender<T> sender;
  private final String keyId;
  private final String fingerprint;
  private final long startNanos = System.nanoTime();

  GuardedCall(
      Settings settings, IdempotencyRequest request, ResultCodec<T> codec, Sender<T> sender) {
    this.settings = settings;
    this.request = request;
    this.codec = codec;
    this.sender = sender;
    this.keyId = Digests.keyId(request.key());
    this.fingerprint = Digests.fingerprint(request.fingerprint());
  }

  Outcome<T> run() {
    long waitStartNanos = 0;
    long pollNanos = FIRST_POLL_NANOS;
    while (true) {
      String ownerToken = newOwnerToken();
      ClaimResult result;
      try {
        result = settings.store().claim(claimRequest(ownerToken));
      } catch (RuntimeException e) {
        return onClaimFailure(e);
      }
      if (result instanceof ClaimResult.Claimed claimed) {
        if (waitStartNanos != 0) {
          emit(Type.WAITED, claimed.attempt(), System.nanoTime() - waitStartNanos, null);
        }
        return sendAsOwner(ownerToken, claimed);
      }
      ClaimResult.Existing existing = (ClaimResult.Existing) result;
      StoredRecord record = existing.record();
      if (!record.fingerprint().equals(fingerprint)) {
        emit(Type.KEY_REUSE, record.attempt(), elapsed(), null);
        throw new IdempotencyKeyReuseException(keyId);
      }
      if (record.state() != RecordState.IN_PROGRESS) {
        if (waitStartNanos != 0) {
          emit(Type.WAITED, record.attempt(), System.nanoTime() - waitStartNanos, null);
        }
        return replay(record);
      }
      if (existing.leaseExpired()) {
        emit(Type.OUTCOME_UNKNOWN, record.attempt(), elapsed(), null);
        throw new IdempotencyOutcomeUnknownException(keyId, record.attempt());
      }
      long now = System.nanoTime();
      if (waitStartNanos == 0) {
        waitStartNanos = now;
      }
      long remaining = settings.inFlightWait().toNanos() - (now - waitStartNanos);
      if (remaining <= 0) {
        throw inProgress(record.attempt(), now - waitStartNanos, null);
      }
      try {
        TimeUnit.NANOSECONDS.sleep(Math.min(pollNanos, remaining));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw inProgress(record.attempt(), System.nanoTime() - waitStartNanos, e);
      }
      pollNanos = Math.min(pollNanos * 2, MAX_POLL_NANOS);
    }
  }

  private ClaimRequest claimRequest(String ownerToken) {
    return new ClaimRequest(
        keyId,
        ownerToken,
        fingerprint,
        settings.clock().instant(),
        settings.lease(),
        request.ttl(),
        settings.takeoverPolicy() == TakeoverPolicy.TAKE_OVER,
        settings.storeRawKeys() ? request.key() : null);
  }

  private Outcome<T> onClaimFailure(RuntimeException failure) {
    KeyStoreException storeFailure =
        failure instanceof KeyStoreException e
            ? e
            : new KeyStoreException("The key store failed to claim key " + keyId, failure);
    emit(Type.STORE_ERROR, 0, elapsed(), storeFailure);
    if (!settings.failOpen()) {
      throw storeFailure;
    }
    log.warn(
        "Key store unavailable; fail-open mode sends key {} without a claim (a duplicate is"
            + " possible)",
        keyId,
        storeFailure);
    emit(Type.FAIL_OPEN_SEND, 1, elapsed(), storeFailure);
    T value = callSender(1);
    return new Outcome<>(value, false, 1, false);
  }

  private Outcome<T> sendAsOwner(String ownerToken, ClaimResult.Claimed claimed) {
    int attempt = claimed.attempt();
    if (claimed.takeover()) {
      log.warn(
          "Took over key {} at attempt {}: the previous attempt outlived its lease without an"
              + " outcome and may have sent; the provider key lets the provider absorb a duplicate",
          keyId,
          attempt);
      emit(Type.TAKEOVER, attempt, elapsed(), null);
    } else {
      emit(Type.CLAIMED, attempt, elapsed(), null);
    }
    Instant sendStart = settings.clock().instant();
    T value;
    try {
      value = callSender(attempt);
    } catch (Throwable failure) {
      onSendFailure(ownerToken, attempt, failure, sendNanos(sendStart));
      throw failure;
    }
    long sendNanos = sendNanos(sendStart);
    if (sendNanos > settings.lease().toNanos()) {
      log.warn(
          "The sender for key {} ran {} ms, longer than its lease of {} ms; another caller may"
              + " have taken the key over. Raise the lease above the slowest send",
          keyId,
          TimeUnit.NANOSECONDS.toMillis(sendNanos),
          settings.lease().toMillis());
      emit(Type.LEASE_OVERRUN, attempt, sendNanos, null);
    }
    boolean recorded =
        recordOutcome(ownerToken, attempt, RecordState.COMPLETED, encode(value, attempt));
    if (recorded) {
      emit(Type.COMPLETED, attempt, sendNanos, null);
    }
    return new Outcome<>(value, false, attempt, recorded);
  }

  /** Runs the sender; only unchecked throwables escape, so callers can rethrow them as they are. */
  private T callSender(int attempt) {
    SendContext context =
        new SendContext(
            request.key(),
            Digests.providerKey(request.key()),
            Digests.providerUuid(request.key()),
            attempt);
    try {
      return sender.send(context);
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Exception e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      throw new SendFailedException(keyId, e);
    }
  }

  private void onSendFailure(String ownerToken, int attempt, Throwable thrown, long sendNanos) {
    Throwable failure =
        thrown instanceof SendFailedException && thrown.getCause() != null
            ? thrown.getCause()
            : thrown;
    boolean permanent = false;
    if (!(failure instanceof Error)) {
      try {
        permanent = settings.failureClassifier().isPermanent(failure);
      } catch (RuntimeException e) {
        log.warn("The FailureClassifier threw; treating the failure as transient", e);
      }
    }
    try {
      if (permanent
          && recordOutcome(ownerToken, attempt, RecordState.FAILED, Payloads.failure(failure))) {
        emit(Type.FAILURE_STORED, attempt, sendNanos, failure);
        return;
      }
      if (settings.store().release(keyId, ownerToken)) {
        emit(Type.RELEASED, attempt, sendNanos, failure);
      } else {
        log.debug("Key {} was no longer ours to release after a failed send", keyId);
      }
    } catch (RuntimeException storeFailure) {
      log.warn(
          "Could not release key {} after a failed send; it frees itself when the lease ends",
          keyId,
          storeFailure);
      thrown.addSuppressed(storeFailure);
    }
  }

  private byte[] encode(T value, int attempt) {
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

  /**
   * Writes an outcome, fenced, retrying a store failure a few times. Never throws: after a send, an
   * exception would invite a retry, which is a duplicate.
   */
  private boolean recordOutcome(String ownerToken, int attempt, RecordState state, byte[] payload) {
    RuntimeException lastFailure = null;
    for (int i = 1; i <= settings.completionAttempts(); i++) {
      try {
        CompleteRequest complete =
            new CompleteRequest(keyId, ownerToken, state, payload, settings.clock().instant());
        if (settings.store().complete(complete)) {
          return true;
        }
        log.warn(
            "Key {} was taken over while attempt {} was sending; its outcome is not recorded",
            keyId,
            attempt);
        emit(Type.OUTCOME_NOT_RECORDED, attempt, elapsed(), null);
        return false;
      } catch (RuntimeException e) {
        lastFailure = e;
        if (i < settings.completionAttempts() && !pause(COMPLETION_BACKOFF_MILLIS << (i - 1))) {
          break;
        }
      }
    }
    log.warn(
        "Sent key {} but could not record the outcome after {} attempts; a repeat after the lease"
            + " may send again",
        keyId,
        settings.completionAttempts(),
        lastFailure);
    emit(Type.OUTCOME_NOT_RECORDED, attempt, elapsed(), lastFailure);
    return false;
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

  private IdempotencyInProgressException inProgress(
      int attempt, long waitedNanos, Throwable cause) {
    emit(Type.IN_PROGRESS_CONFLICT, attempt, waitedNanos, cause);
    return IdempotencyInProgressException.afterWaiting(keyId, Duration.ofNanos(waitedNanos), cause);
  }

  /** Send time on the guard's clock, the clock leases are measured with. */
  private long sendNanos(Instant sendStart) {
    return Duration.between(sendStart, settings.clock().instant()).toNanos();
  }

  private long elapsed() {
    return System.nanoTime() - startNanos;
  }

  private void emit(Type type, int attempt, long nanos, Throwable error) {
    log.debug("{} key={} attempt={}", type, keyId, attempt);
    settings.listeners().emit(type, keyId, attempt, nanos, error);
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

  private static String newOwnerToken() {
    byte[] bytes = new byte[16];
    RANDOM.nextBytes(bytes);
    return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
  }
}
