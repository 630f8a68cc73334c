package dev.idempotency.spring.messaging;

import java.time.Duration;
import java.util.Objects;

/**
 * The pause before a deferred delivery comes back: {@code initial}, then multiplied by {@code
 * multiplier} at each deferral of the same delivery, at most {@code max}; never a last attempt.
 * Immutable.
 *
 * @param initial the first pause, positive
 * @param multiplier the growth, at least 1
 * @param max the longest pause, not shorter than {@code initial}
 */
public record DeliveryBackOff(Duration initial, double multiplier, Duration max) {

  /**
   * Validates the settings.
   *
   * @param initial see {@link #initial()}
   * @param multiplier see {@link #multiplier()}
   * @param max see {@link #max()}
   */
  public DeliveryBackOff {
    Objects.requireNonNull(initial, "initial must not be null");
    Objects.requireNonNull(max, "max must not be null");
    if (initial.isNegative() || initial.isZero()) {
      throw new IllegalArgumentException("the first backoff must be positive, was " + initial);
    }
    if (!(multiplier >= 1.0)) {
      throw new IllegalArgumentException(
          "the backoff multiplier must be at least 1, was " + multiplier);
    }
    if (max.compareTo(initial) < 0) {
      throw new IllegalArgumentException(
          "the longest backoff (" + max + ") must not be shorter than the first (" + initial + ")");
    }
  }

  /**
   * The pause before the delivery that follows {@code deferrals} earlier deferrals.
   *
   * @param deferrals how many times the delivery was deferred before, 0 for the first
   * @return the pause
   */
  public Duration delay(int deferrals) {
    double millis = initial.toMillis() * Math.pow(multiplier, Math.max(0, deferrals));
    return millis >= max.toMillis() ? max : Duration.ofMillis((long) millis);
  }
}
