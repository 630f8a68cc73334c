package dev.idempotency.reliability;

import static dev.idempotency.reliability.StalledClaims.TTL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyStoredFailureException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * probeR, on a real Redis stalled with SIGSTOP: the sender fails permanently while Redis stalls, so
 * the FAILED write times out (handed to PendingOutcomes) and so does the release after it. Once
 * Redis is back the FAILED record must be written and a repeat must get the stored failure, the
 * sender not called again (SPEC 5/6). On the blocking path GuardedCall.onSendFailure hands the
 * failed release to UnsentClaims.release without the outcomePending check 17c2e84 added to the
 * async path, so the two background writes race once Redis answers; repeated 3 times.
 *
 * <p>Fixed in 0f6bd3d: no release, direct or in the background, while the permanent failure is
 * written in the background (blocking and async); 2/2 after, the blocking case failed before.
 */
class RedisPermanentFailureReleaseProbeTest {

  @ParameterizedTest
  @ValueSource(strings = {"blocking", "async"})
  void aPermanentFailureWrittenLateOnRedisIsNotErasedByARelease(String how) throws Exception {
    for (int round = 0; round < 3; round++) {
      try (RestartableRedis redis = new RestartableRedis(false)) {
        RedisKeyStore store =
            RedisKeyStore.builder(Stores.redisClient(redis.uri(), Duration.ofSeconds(60)))
                .operationTimeout(Duration.ofSeconds(1))
                .build();
        assertThat(store.awaitConnection(Duration.ofSeconds(30))).isTrue();
        IdempotencyGuard guard =
            IdempotencyGuard.builder()
                .store(store)
                .lease(Duration.ofMinutes(2))
                .completionAttempts(1)
                .failureClassifier(failure -> failure instanceof IllegalArgumentException)
                .build();
        String key = "probe-permanent-stalled:" + how + ":" + System.nanoTime();
        AtomicInteger calls = new AtomicInteger();
        boolean resumed = false;
        try {
          if (how.equals("blocking")) {
            assertThatThrownBy(
                    () ->
                        guard.execute(
                            key,
                            TTL,
                            ctx -> {
                              calls.incrementAndGet();
                              redis.pause();
                              throw new IllegalArgumentException("invalid phone number");
                            }))
                .isInstanceOf(IllegalArgumentException.class);
          } else {
            CompletableFuture<String> stage =
                guard
                    .executeAsync(
                        key,
                        TTL,
                        ctx -> {
                          calls.incrementAndGet();
                          redis.pause();
                          return CompletableFuture.<String>failedFuture(
                              new IllegalArgumentException("invalid phone number"));
                        })
                    .toCompletableFuture();
            assertThatThrownBy(() -> stage.get(60, TimeUnit.SECONDS))
                .isInstanceOf(ExecutionException.class);
          }
          redis.resume();
          resumed = true;
          Poll.within(Duration.ofSeconds(60))
              .ignoring(KeyStoreException.class)
              .until(
                  "the record settled (FAILED, or erased)",
                  () -> guard.find(key),
                  found -> found.map(r -> r.state() != RecordState.IN_PROGRESS).orElse(true));
          Optional<RecordState> after = guard.find(key).map(IdempotencyRecord::state);
          Throwable repeat =
              catchThrowable(
                  () -> guard.execute(key, TTL, ctx -> "sent-" + calls.incrementAndGet()));
          assertThat(calls)
              .as("sender calls (round %s, record once Redis was back: %s)", round, after)
              .hasValue(1);
          assertThat(repeat).isInstanceOf(IdempotencyStoredFailureException.class);
        } finally {
          if (!resumed) {
            redis.resume();
          }
          guard.close();
          store.close();
        }
      }
    }
  }
}
