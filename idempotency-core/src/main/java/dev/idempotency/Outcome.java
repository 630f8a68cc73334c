package dev.idempotency;

import org.jspecify.annotations.Nullable;

/**
 * The result of a guarded call, with how it came about: a first send or a replay. Use {@link
 * #replayed()} for an {@code Idempotent-Replayed} response header or a metric.
 *
 * @param value the sender's result, or the stored one on a replay; may be {@code null}
 * @param replayed {@code true} if the sender was not called and a stored result was returned
 * @param attempt the attempt that produced the value
 * @param recorded {@code false} if the value was sent but its outcome could not be recorded (the
 *     store failed after the send, the claim was lost, or fail-open sent without a claim)
 * @param <T> the result type
 */
public record Outcome<T>(@Nullable T value, boolean replayed, int attempt, boolean recorded) {}
