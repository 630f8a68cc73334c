package dev.idempotency;

import java.time.Duration;
import java.util.Objects;

/**
 * Names the usual windows and checks a {@code ttl}.
 *
 * <p>The window is how long a key is remembered, from its first claim. Too long and the store
 * grows; too short and a late retry becomes a duplicate. Transactional sends (one-time codes,
 * receipts) keep keys 24 to 72 hours; marketing sends keep them shorter.
 */
public final class IdempotencyWindows {

  /** The shortest usual window for transactional sends: 24 hours. */
  public static final Duration TRANSACTIONAL = Duration.ofHours(24);

  /** The longest usual window for transactional sends: 72 hours. */
  public static final Duration TRANSACTIONAL_EXTENDED = Duration.ofHours(72);

  /** A window for marketing sends, shorter than transactional ones: 6 hours. */
  public static final Duration MARKETING = Duration.ofHours(6);

  /** The longest {@code ttl} accepted: 365 days. */
  public static final Duration MAX_TTL = Duration.ofDays(365);

  /**
   * The safety factor of {@link #forRetrySchedule}: the window is this many times the schedule's
   * worst-case span, so a producer whose retries drift (a paused consumer, a redeploy) still lands
   * inside it.
   */
  public static final int RETRY_SAFETY_FACTOR = 2;

  /** The shortest window {@link #forRetrySchedule} returns: 1 minute. */
  public static final Duration MIN_DERIVED_WINDOW = Duration.ofMinutes(1);

  private IdempotencyWindows() {}

  /**
   * A window that outlives a producer's retries: {@value #RETRY_SAFETY_FACTOR} times the schedule's
   * {@linkplain RetrySchedule#worstCaseSpan() worst-case span}, at least {@link
   * #MIN_DERIVED_WINDOW}. A window shorter than the last retry turns that retry into a duplicate.
   *
   * @param schedule the producer's retry schedule
   * @return the window
   * @throws IllegalArgumentException if that window would exceed {@link #MAX_TTL}
   */
  public static Duration forRetrySchedule(RetrySchedule schedule) {
    Objects.requireNonNull(schedule, "schedule");
    Duration span = schedule.worstCaseSpan();
    if (span.compareTo(MAX_TTL.dividedBy(RETRY_SAFETY_FACTOR)) > 0) {
      throw new IllegalArgumentException(
          "the retry schedule spans " + span + ", too long for a window of at most " + MAX_TTL);
    }
    Duration window = span.multipliedBy(RETRY_SAFETY_FACTOR);
    return window.compareTo(MIN_DERIVED_WINDOW) < 0 ? MIN_DERIVED_WINDOW : window;
  }

  /**
   * Checks a {@code ttl}.
   *
   * @param ttl the window
   * @return the same ttl
   * @throws NullPointerException if null
   * @throws IllegalArgumentException if not positive, under 1 ms, or longer than {@link #MAX_TTL}
   */
  public static Duration requireValidTtl(Duration ttl) {
    Objects.requireNonNull(ttl, "ttl must not be null");
    if (ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("ttl must be positive, was " + ttl);
    }
    if (ttl.toMillis() < 1) {
      throw new IllegalArgumentException(
          "ttl must be at least 1 ms (stores keep whole milliseconds), was " + ttl);
    }
    if (ttl.compareTo(MAX_TTL) > 0) {
      throw new IllegalArgumentException("ttl must be at most 365 days, was " + ttl);
    }
    return ttl;
  }
}
