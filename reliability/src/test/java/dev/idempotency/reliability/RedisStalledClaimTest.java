package dev.idempotency.reliability;

import static dev.idempotency.reliability.StalledClaims.TTL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.TakeoverPolicy;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 37 (found by probeA): a claim that the Redis store gives up on because Redis stalled
 * (SIGSTOP here; a long-running script, a fork or a swap storm would do) is applied once Redis goes
 * on. The caller was told {@link KeyStoreException} and nothing was sent, so the key must not stay
 * {@code IN_PROGRESS} for a whole lease (a retry would get {@code IdempotencyInProgressException}),
 * nor, in strict mode, become "outcome unknown" for its window: the guard takes the claim back in
 * the background, fenced by its owner token (SPEC 1, 14: calls fail closed "until the store
 * answers, then work without a restart").
 */
class RedisStalledClaimTest {

  @ParameterizedTest
  @ValueSource(strings = {"blocking", "async"})
  void aClaimTimedOutWhileRedisStalledDoesNotHoldItsKeyOnceRedisIsBack(String how)
      throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      RedisKeyStore store = open(redis);
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      String key = "stalled:" + how + ":" + System.nanoTime();
      AtomicInteger sends = new AtomicInteger();
      boolean resumed = false;
      try {
        redis.pause();
        if (how.equals("blocking")) {
          assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
              .isInstanceOf(KeyStoreException.class);
        } else {
          CompletableFuture<String> stage =
              guard
                  .executeAsync(
                      key,
                      TTL,
                      ctx -> CompletableFuture.completedFuture("n_" + sends.incrementAndGet()))
                  .toCompletableFuture();
          assertThatThrownBy(() -> stage.get(30, TimeUnit.SECONDS))
              .isInstanceOf(ExecutionException.class)
              .hasCauseInstanceOf(KeyStoreException.class);
        }
        assertThat(sends).as("nothing sent while Redis stalled").hasValue(0);
        redis.resume();
        resumed = true;

        // Redis answers again (the guard's own probe closes its breaker) and the guard takes the
        // claim back in the background
        StalledClaims.assertTakenBackAndSentOnRetry(
            guard, key, sends, "the claim that timed out, nothing sent, once Redis is back");
      } finally {
        if (!resumed) {
          redis.resume();
        }
        guard.close();
        store.close();
      }
    }
  }

  /**
   * The same in strict mode ({@link TakeoverPolicy#REFUSE}), after the lease of the claim that
   * timed out ran out: the guard told its caller that nothing was sent, yet the key is then
   * reported as of unknown outcome ({@code IdempotencyOutcomeUnknownException}) for the rest of its
   * window, so the notification can never be sent in it.
   */
  @Test
  void inStrictModeAKeyWhoseClaimTimedOutCanBeSentOnceRedisIsBack() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      RedisKeyStore store = open(redis);
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(store)
              .lease(Duration.ofSeconds(2))
              .inFlightWait(Duration.ZERO)
              .takeoverPolicy(TakeoverPolicy.REFUSE)
              .build();
      String key = "stalled-strict:" + System.nanoTime();
      AtomicInteger sends = new AtomicInteger();
      boolean resumed = false;
      try {
        redis.pause();
        assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
            .isInstanceOf(KeyStoreException.class);
        redis.resume();
        resumed = true;
        // bounded polling while the store comes back and the stray claim's lease runs out; an
        // IdempotencyOutcomeUnknownException is not waited out: it fails the test at once
        String result =
            Poll.within(Duration.ofSeconds(60))
                .every(Duration.ofMillis(50))
                .ignoring(KeyStoreException.class)
                .ignoring(IdempotencyInProgressException.class)
                .until(
                    "a retry of the key that is not refused",
                    () -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()),
                    answer -> true);
        assertThat(sends).as("sends of a key never sent before").hasValue(1);
        assertThat(result).as("the retry's result").isEqualTo("n_1");
      } finally {
        if (!resumed) {
          redis.resume();
        }
        guard.close();
        store.close();
      }
    }
  }

  /** A store that gives up on Redis after 1 s, connected before the test stalls Redis. */
  private static RedisKeyStore open(RestartableRedis redis) {
    RedisKeyStore store =
        RedisKeyStore.builder(Stores.redisClient(redis.uri(), Duration.ofSeconds(60)))
            .operationTimeout(Duration.ofSeconds(1))
            .build();
    assertThat(store.awaitConnection(Duration.ofSeconds(30))).isTrue();
    return store;
  }
}
