package dev.idempotency;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.spi.ClaimResult;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one guarded call reports: its {@link IdempotencyEvent events}, to the guard's listeners and
 * to the call's observation, and its log lines. Both name the key only by its digest, never the key
 * or the result. One instance per {@link CallSupport}, used by one thread at a time: the
 * asynchronous driver hands its call from thread to thread through futures, which order the
 * reports.
 */
final class CallEvents {

  /** The guard's logger: every log line of a call is the guard's. */
  static final Logger log = LoggerFactory.getLogger(IdempotencyGuard.class);

  private final GuardSettings settings;
  private final String operation;
  private final String keyId;
  private final long startNanos;
  private IdempotencyObserver.CallObservation observation =
      IdempotencyObserver.CallObservation.NONE;

  /**
   * @param startNanos {@link System#nanoTime()} when the call began: event durations count from it
   */
  CallEvents(GuardSettings settings, String operation, String keyId, long startNanos) {
    this.settings = settings;
    this.startNanos = startNanos;
    this.operation = operation;
    this.keyId = keyId;
  }

  /** The call starts: the observers follow it from here (for execute and executeAsync). */
  IdempotencyObserver.CallObservation start() {
    observation = settings.observers.onCallStart(operation, settings.store.kind());
    return observation;
  }

  /**
   * Runs a blocking call's body on this thread under its observation: started here, its scope open
   * around the body, ended with the body's failure (or none) whichever way it leaves.
   */
  <R> R observed(Supplier<R> body) {
    IdempotencyObserver.CallObservation started = start();
    Throwable failure = null;
    try (IdempotencyObserver.Scope scope = started.openScope()) {
      return body.get();
    } catch (RuntimeException | Error e) {
      failure = e;
      throw e;
    } finally {
      started.onEnd(failure);
    }
  }

  /** Nanoseconds since the call began. */
  long elapsed() {
    return System.nanoTime() - startNanos;
  }

  /** Delivers an event to the listeners and the observation, and logs it at debug. */
  void emit(Type type, int attempt, long nanos, Throwable error) {
    if (log.isDebugEnabled()) {
      log.debug("{} operation={} key={} attempt={}", type, operation, keyId, attempt);
    }
    if (settings.listeners.wanted() || observation != IdempotencyObserver.CallObservation.NONE) {
      IdempotencyEvent event = Listeners.event(type, operation, keyId, attempt, nanos, error);
      settings.listeners.deliver(event);
      observation.onEvent(event);
    }
  }

  /** A granted claim: a first claim, or a takeover of an expired lease. */
  void claimed(ClaimResult.Claimed claimed) {
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

  /** The store failed and fail-open mode sends without a claim. */
  void failOpen(KeyStoreException storeFailure) {
    log.warn(
        "Key store unavailable; fail-open mode sends key {} without a claim (a duplicate is"
            + " possible)",
        keyId,
        storeFailure);
    emit(Type.FAIL_OPEN_SEND, 1, elapsed(), storeFailure);
  }

  /** The sender ran past its lease (or the lease was lost meanwhile). */
  void leaseOverrun(int attempt, long sendNanos) {
    log.warn(
        "The sender for key {} ran {} ms and its lease of {} ms ran out{}; another caller may"
            + " have taken the key over. Raise the lease, or the renewal limit",
        keyId,
        TimeUnit.NANOSECONDS.toMillis(sendNanos),
        settings.lease.toMillis(),
        settings.leaseRenewal ? " (renewal failed or reached its limit)" : "");
    emit(Type.LEASE_OVERRUN, attempt, sendNanos, null);
  }

  /** The result could not be encoded: the send is recorded without it. */
  void resultNotEncoded(int attempt, Exception cause) {
    log.warn(
        "The result for key {} could not be encoded; recording the send without a result",
        keyId,
        cause);
    emit(Type.RESULT_NOT_STORED, attempt, elapsed(), cause);
  }

  /** The encoded result is over the store's limit: the send is recorded without it. */
  void resultTooLarge(int attempt, int length, int limit) {
    log.warn(
        "The result for key {} is {} bytes, over the store's limit of {}; recording the send"
            + " without a result",
        keyId,
        length,
        limit);
    emit(Type.RESULT_NOT_STORED, attempt, elapsed(), null);
  }

  /**
   * The outcome of a send could not be recorded: the key was taken over ({@code lastFailure} null),
   * or the store failed every attempt.
   */
  void notRecorded(int attempt, Throwable lastFailure) {
    notRecorded(attempt, lastFailure, false);
  }

  /**
   * As {@link #notRecorded(int, Throwable)}; {@code pending}: the guard goes on writing the outcome
   * in the background until its lease ends.
   */
  void notRecorded(int attempt, Throwable lastFailure, boolean pending) {
    if (pending) {
      log.warn(
          "Sent key {} but could not record the outcome after {} attempts; writing it in the"
              + " background until its lease ends",
          keyId,
          settings.completionAttempts,
          lastFailure);
    } else if (lastFailure == null) {
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

  /**
   * A failed send's claim could not be released: the guard tries again in the background ({@link
   * UnsentClaims#release}); else it frees itself when its lease ends.
   */
  void releaseFailed(Throwable storeFailure) {
    log.warn(
        "Could not release key {} after a failed send; trying again in the background, else it"
            + " frees itself when the lease ends",
        keyId,
        storeFailure);
  }
}
