package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class IdempotencyWindowsTest {

  @Test
  void namedWindowsFollowTheUsualPractice() {
    assertThat(IdempotencyWindows.TRANSACTIONAL).isEqualTo(Duration.ofHours(24));
    assertThat(IdempotencyWindows.TRANSACTIONAL_EXTENDED).isEqualTo(Duration.ofHours(72));
    assertThat(IdempotencyWindows.MARKETING).isLessThan(IdempotencyWindows.TRANSACTIONAL);
  }

  @Test
  void worstCaseSpanAddsCappedJitteredDelaysAndAttemptTimeouts() {
    // Delays before retries 1..4: 1s, 2s, 4s, 5s (capped); +20% jitter = 14.4s; 5 attempts x 10s.
    RetrySchedule schedule =
        RetrySchedule.exponential(5, Duration.ofSeconds(1), 2.0, Duration.ofSeconds(5))
            .withJitter(0.2)
            .withAttemptTimeout(Duration.ofSeconds(10));

    assertThat(schedule.worstCaseSpan()).isEqualTo(Duration.ofMillis(64_400));
  }

  @Test
  void windowForARetryScheduleIsTwiceItsSpan() {
    RetrySchedule schedule =
        RetrySchedule.exponential(8, Duration.ofMinutes(1), 3.0, Duration.ofHours(2));

    // 1 + 3 + 9 + 27 + 81 + 120 + 120 minutes = 361 minutes.
    assertThat(schedule.worstCaseSpan()).isEqualTo(Duration.ofMinutes(361));
    assertThat(IdempotencyWindows.forRetrySchedule(schedule)).isEqualTo(Duration.ofMinutes(722));
  }

  @Test
  void windowForAShortScheduleIsAtLeastAMinute() {
    RetrySchedule schedule =
        RetrySchedule.exponential(2, Duration.ofMillis(100), 2.0, Duration.ofMillis(100));

    assertThat(IdempotencyWindows.forRetrySchedule(schedule)).isEqualTo(Duration.ofMinutes(1));
  }

  @Test
  void scheduleLongerThanTheLongestWindowIsRefused() {
    RetrySchedule schedule =
        RetrySchedule.exponential(1000, Duration.ofDays(1), 1.0, Duration.ofDays(1));

    assertThatThrownBy(() -> IdempotencyWindows.forRetrySchedule(schedule))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("too long");
  }

  @Test
  void scheduleRefusesNonsense() {
    assertThatThrownBy(() -> RetrySchedule.exponential(0, Duration.ZERO, 2, Duration.ZERO))
        .hasMessageContaining("maxAttempts");
    assertThatThrownBy(
            () -> RetrySchedule.exponential(3, Duration.ofSeconds(2), 0.5, Duration.ofSeconds(9)))
        .hasMessageContaining("multiplier");
    assertThatThrownBy(
            () -> RetrySchedule.exponential(3, Duration.ofSeconds(2), 2, Duration.ofSeconds(1)))
        .hasMessageContaining("maxBackoff");
    assertThatThrownBy(
            () ->
                RetrySchedule.exponential(3, Duration.ofSeconds(1), 2, Duration.ofSeconds(1))
                    .withJitter(1.5))
        .hasMessageContaining("jitter");
  }

  @Test
  void ttlChecks() {
    assertThat(IdempotencyWindows.requireValidTtl(Duration.ofDays(365)))
        .isEqualTo(Duration.ofDays(365));
    assertThatThrownBy(() -> IdempotencyWindows.requireValidTtl(null))
        .isInstanceOf(NullPointerException.class);
    assertThatThrownBy(() -> IdempotencyWindows.requireValidTtl(Duration.ofDays(366)))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
