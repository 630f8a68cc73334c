package dev.idempotency;

import java.time.Duration;
import java.util.Objects;

/**
 * A producer's retry schedule, from which {@link IdempotencyWindows#forRetrySchedule} derives a
 * window that outlives the last retry.
 *
 * <p>Delay before retry {@code n} (1-based) is {@code min(maxBackoff, initialBackoff *
 * multiplier^(n-1))}, stretched by up to {@code jitter} (0.2 means up to 20% longer).
 *
 * @param maxAttempts total attempts including the first, at least 1
 * @param initialBackoff delay before the first retry, not negative
 * @param multiplier growth of the delay per retry, at least 1
 * @param maxBackoff cap on one delay, at least {@code initialBackoff}
 * @param jitter extra fraction a delay may grow by, 0 to 1
 * @param attemptTimeout how long one attempt may take before the producer gives up on it
 */
public record RetrySchedule(
    int maxAttempts,
    Duration initialBackoff,
    double multiplier,
    Duration maxBackoff,
    double jitter,
    Duration attemptTimeout) {

  /**
   * Checks every component.
   *
   * @param maxAttempts see {@link #maxAttempts()}
   * @param initialBackoff see {@link #initialBackoff()}
   * @param multiplier see {@link #multiplier()}
   * @param maxBackoff see {@link #maxBackoff()}
   * @param jitter see {@link #jitter()}
   * @param attemptTimeout see {@link #attemptTimeout()}
   */
  public RetrySchedule {
    Objects.requireNonNull(initialBackoff, "initialBackoff");
    Objects.requireNonNull(maxBackoff, "maxBackoff");
    Objects.requireNonNull(attemptTimeout, "attemptTimeout");
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("maxAttempts must be at least 1, was " + maxAttempts);
    }
    if (initialBackoff.isNegative()) {
      throw new IllegalArgumentException("initialBackoff must not be negative");
    }
    if (!(multiplier >= 1.0) || Double.isInfinite(multiplier)) {
      throw new IllegalArgumentException("multiplier must be a finite number >= 1");
    }
    if (maxBackoff.compareTo(initialBackoff) < 0) {
      throw new IllegalArgumentException("maxBackoff must be at least initialBackoff");
    }
    if (!(jitter >= 0.0 && jitter <= 1.0)) {
      throw new IllegalArgumentException("jitter must be between 0 and 1, was " + jitter);
    }
    if (attemptTimeout.isNegative()) {
      throw new IllegalArgumentException("attemptTimeout must not be negative");
    }
  }

  /**
   * An exponential schedule without jitter and with no attempt time counted.
   *
   * @param maxAttempts total attempts including the first
   * @param initialBackoff delay before the first retry
   * @param multiplier growth per retry
   * @param maxBackoff cap on one delay
   * @return the schedule
   */
  public static RetrySchedule exponential(
      int maxAttempts, Duration initialBackoff, double multiplier, Duration maxBackoff) {
    return new RetrySchedule(
        maxAttempts, initialBackoff, multiplier, maxBackoff, 0.0, Duration.ZERO);
  }

  /**
   * The same schedule with jitter.
   *
   * @param fraction 0 to 1
   * @return a new schedule
   */
  public RetrySchedule withJitter(double fraction) {
    return new RetrySchedule(
        maxAttempts, initialBackoff, multiplier, maxBackoff, fraction, attemptTimeout);
  }

  /**
   * The same schedule with a per-attempt timeout counted into its span.
   *
   * @param timeout how long one attempt may run
   * @return a new schedule
   */
  public RetrySchedule withAttemptTimeout(Duration timeout) {
    return new RetrySchedule(maxAttempts, initialBackoff, multiplier, maxBackoff, jitter, timeout);
  }

  /**
   * The worst-case time from the start of the first attempt to the end of the last: every delay at
   * its jittered maximum and every attempt running to its timeout.
   *
   * @return the span
   */
  public Duration worstCaseSpan() {
    double totalMillis = (double) maxAttempts * attemptTimeout.toMillis();
    double delay = initialBackoff.toMillis();
    for (int retry = 1; retry < maxAttempts; retry++) {
      totalMillis += Math.min(delay, maxBackoff.toMillis()) * (1.0 + jitter);
      delay = Math.min(delay * multiplier, maxBackoff.toMillis());
      if (totalMillis > IdempotencyWindows.MAX_TTL.toMillis()) {
        break;
      }
    }
    return Duration.ofMillis((long) Math.ceil(totalMillis));
  }
}
