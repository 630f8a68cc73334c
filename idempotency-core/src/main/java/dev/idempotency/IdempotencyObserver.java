package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * Sees what a guard does, for metrics and traces: every event, every guarded call from its start to
 * its end, and the time of every store operation. Module {@code idempotency-micrometer} implements
 * it with Micrometer meters and an {@code Observation} per call; register one with {@link
 * IdempotencyGuard.Builder#observer(IdempotencyObserver)}.
 *
 * <p>Methods are called on the guard's threads, often on a caller's hot path: they must be quick,
 * thread-safe, and must not throw (what one throws is logged and ignored). Names they see are the
 * low-cardinality operation of {@link IdempotencyRequest#operation()} and {@link
 * dev.idempotency.spi.KeyStore#kind()}, never a key.
 */
public interface IdempotencyObserver {

  /**
   * An event of the guard, as {@link IdempotencyListener}s get it (batches included).
   *
   * @param event the event
   */
  default void onEvent(IdempotencyEvent event) {}

  /**
   * A call of {@code execute}, {@code executeForOutcome} or their async forms starts, on the
   * caller's thread, before the claim.
   *
   * @param operation the call's operation name
   * @param store the store's kind ({@code memory}, {@code jdbc}, {@code redis}, ...)
   * @return what follows the call to its end; {@link CallObservation#NONE} for nothing
   */
  default CallObservation onCallStart(String operation, String store) {
    return CallObservation.NONE;
  }

  /**
   * A store operation ended.
   *
   * @param store the store's kind
   * @param operation {@code claim}, {@code complete}, {@code release}, {@code take_back}, {@code
   *     extend}, or their batch forms {@code claim_all}, {@code complete_all}, {@code extend_all}
   * @param nanos how long it took
   * @param failure what it threw, or {@code null}
   */
  default void onStoreOperation(
      String store, String operation, long nanos, @Nullable Throwable failure) {}

  /** One guarded call, from its start to its end. */
  interface CallObservation {

    /** Follows nothing. */
    CallObservation NONE = new CallObservation() {};

    /**
     * One of the call's own events (they also reach {@link IdempotencyObserver#onEvent}).
     *
     * @param event the event
     */
    default void onEvent(IdempotencyEvent event) {}

    /**
     * Makes the call current on this thread (a trace scope) while a blocking call runs; the guard
     * closes it on the same thread.
     *
     * @return the scope
     */
    default Scope openScope() {
      return Scope.NONE;
    }

    /**
     * The call ended.
     *
     * @param failure the exception the caller gets, or {@code null} for a result
     */
    default void onEnd(@Nullable Throwable failure) {}
  }

  /** A scope a call opened on a thread. */
  interface Scope extends AutoCloseable {

    /** No scope. */
    Scope NONE = () -> {};

    @Override
    void close();
  }
}
