package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The check shared by the stalled-store tests (issue 37): once the store answers again, the claim
 * of a call that failed with {@link KeyStoreException} and sent nothing is taken back, and a retry
 * sends.
 */
final class StalledClaims {

  /**
   * How long the take-back may take once the store is back: well within the 30 s lease the stray
   * claim would otherwise hold the key, generous for the breaker's probe on a busy machine.
   */
  static final Duration TAKE_BACK_WAIT = Duration.ofSeconds(20);

  static final Duration TTL = Duration.ofHours(1);

  private StalledClaims() {}

  /**
   * Polls (bounded, while the store still refuses) until {@code key} holds no record, then checks
   * that a retry sends, once.
   *
   * @param what the claim taken back, for the failure message
   */
  static void assertTakenBackAndSentOnRetry(
      IdempotencyGuard guard, String key, AtomicInteger sends, String what)
      throws InterruptedException {
    Poll.within(TAKE_BACK_WAIT)
        .ignoring(KeyStoreException.class)
        .until(what + ": no record", () -> guard.find(key), Optional::isEmpty);
    assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
        .as("a retry once the store answers again sends")
        .isEqualTo("n_1");
  }
}
