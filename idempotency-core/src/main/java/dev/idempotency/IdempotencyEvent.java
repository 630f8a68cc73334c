package dev.idempotency;

import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One outcome of the guard (or of a store), for logs and metrics. Events name the key only by its
 * digest, never in clear, and never carry results.
 *
 * @param type what happened
 * @param operation the kind of send, low-cardinality ({@link IdempotencyRequest#operation()}); for
 *     events of a store that knows no request, {@value IdempotencyKey#DEFAULT_OPERATION}
 * @param keyDigest the digest of the key as stored (the store's key id)
 * @param attempt the attempt concerned, 0 when none applies
 * @param duration how long it took: the send for {@link Type#COMPLETED}, the wait for {@link
 *     Type#WAITED}, the whole call otherwise
 * @param error the failure involved, or {@code null}
 */
public record IdempotencyEvent(
    Type type,
    String operation,
    String keyDigest,
    int attempt,
    Duration duration,
    @Nullable Throwable error) {

  /**
   * Checks the required components.
   *
   * @param type see {@link #type()}
   * @param operation see {@link #operation()}
   * @param keyDigest see {@link #keyDigest()}
   * @param attempt see {@link #attempt()}
   * @param duration see {@link #duration()}
   * @param error see {@link #error()}
   */
  public IdempotencyEvent {
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(operation, "operation");
    Objects.requireNonNull(keyDigest, "keyDigest");
    Objects.requireNonNull(duration, "duration");
  }

  /** What happened. */
  public enum Type {
    /** A first claim: the sender is about to run (attempt 1). */
    CLAIMED,
    /** An expired lease was taken over: the sender runs again (attempt above 1). */
    TAKEOVER,
    /** The sender succeeded and its outcome was recorded. */
    COMPLETED,
    /** A repeat got the stored result; the sender was not called. */
    REPLAYED,
    /** A repeat waited for an in-flight call before replaying or claiming. */
    WAITED,
    /** A repeat gave up waiting for an in-flight call ({@link IdempotencyInProgressException}). */
    IN_PROGRESS_CONFLICT,
    /** Strict mode refused an expired lease ({@link IdempotencyOutcomeUnknownException}). */
    OUTCOME_UNKNOWN,
    /** The sender failed and its claim was released for a retry. */
    RELEASED,
    /** The sender failed permanently and the failure was stored for the window. */
    FAILURE_STORED,
    /** A repeat got a stored permanent failure; the sender was not called. */
    FAILURE_REPLAYED,
    /**
     * The sender succeeded but its outcome could not be recorded (the store failed, or the claim
     * was lost to a takeover). The result was returned anyway. Unless the claim was lost, the guard
     * goes on writing the outcome in the background while the lease holds, and then reports {@link
     * #OUTCOME_RECORDED_LATE} or {@link #OUTCOME_ABANDONED} for it.
     */
    OUTCOME_NOT_RECORDED,
    /**
     * An outcome reported {@link #OUTCOME_NOT_RECORDED} was written in the background after all: a
     * repeat replays it. Reported once per such call, beside its earlier event.
     */
    OUTCOME_RECORDED_LATE,
    /**
     * The guard stopped writing an outcome in the background: its lease ended before the store took
     * it, another call took the key over, or the guard was closed after its grace period; or the
     * sender threw {@link OutcomeAbandonedException}, so that nothing was written and the key stays
     * claimed. A repeat after the lease may send again.
     */
    OUTCOME_ABANDONED,
    /** The send happened but its result could not be encoded or was too large to store. */
    RESULT_NOT_STORED,
    /** The sender ran longer than its lease; another caller may have taken the key over. */
    LEASE_OVERRUN,
    /** The key was reused with a different request fingerprint; nothing was sent. */
    KEY_REUSE,
    /** The store failed before the claim. */
    STORE_ERROR,
    /** Fail-open mode: the store failed and the sender ran without a claim. */
    FAIL_OPEN_SEND,
    /**
     * The in-memory store evicted a record for size before its window ended: a repeat of that key
     * would send again. Raise the store's maximum size.
     */
    EVICTED_BEFORE_EXPIRY
  }
}
