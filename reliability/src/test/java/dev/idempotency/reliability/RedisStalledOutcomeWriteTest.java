package dev.idempotency.reliability;

import static dev.idempotency.reliability.StalledClaims.TTL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.redis.RedisKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Suspicion 1 (suspects): Redis stalls (SIGSTOP) after the claim and before the outcome write, so
 * every complete the guard sends times out on the client, yet Redis runs them all once it goes on.
 * The caller gets its result (SPEC 6); the record must end {@code COMPLETED} and a repeat must
 * replay it, never send again (SPEC 1): passes on suspects' base (000427a), refuted. A sender's
 * failure released while Redis stalled must not hold the key once Redis is back (see the test).
 */
class RedisStalledOutcomeWriteTest {

  /** The outcome write given up on by the call is written once Redis is back; no second send. */
  @Test
  void anOutcomeWriteTimedOutWhileRedisStalledIsRecordedOnceRedisIsBack() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      RedisKeyStore store = open(redis);
      List<IdempotencyEvent.Type> events = new CopyOnWriteArrayList<>();
      IdempotencyGuard guard =
          IdempotencyGuard.builder().store(store).listener(e -> events.add(e.type())).build();
      String key = "stalled-complete:" + System.nanoTime();
      AtomicInteger sends = new AtomicInteger();
      boolean resumed = false;
      try {
        String first =
            guard.execute(
                key,
                TTL,
                ctx -> {
                  redis.pause(); // the claim is in; every outcome write now times out
                  return "n_" + sends.incrementAndGet();
                });
        assertThat(first).as("the caller gets its result (SPEC 6)").isEqualTo("n_1");
        assertThat(events).as("events").contains(IdempotencyEvent.Type.OUTCOME_NOT_RECORDED);
        redis.resume();
        resumed = true;

        Poll.within(Duration.ofSeconds(30))
            .ignoring(KeyStoreException.class)
            .until(
                "the record of the sent key completed",
                () -> guard.find(key),
                found -> found.isPresent() && found.get().state() == RecordState.COMPLETED);
        assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
            .as("a repeat replays the first send")
            .isEqualTo("n_1");
        assertThat(sends).as("sends").hasValue(1);
        Poll.within(Duration.ofSeconds(30))
            .until("the background write's end reported", () -> events, e -> ended(e));
        assertThat(events)
            .as("the write is reported recorded late, not abandoned")
            .contains(IdempotencyEvent.Type.OUTCOME_RECORDED_LATE)
            .doesNotContain(IdempotencyEvent.Type.OUTCOME_ABANDONED);
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
   * The sender fails while Redis stalls: the release times out on the client. Redis does not run it
   * late: on a Redis that had not cached the release script, the EVALSHA answers NOSCRIPT after the
   * operation was abandoned, so its EVAL fallback is never sent (Scripts.run, Operation.send).
   * Before the fix the release was never tried again, and the key stayed IN_PROGRESS for the whole
   * lease (30 s) though Redis answered and nothing was being sent (failed on 000427a after 20 s);
   * now the guard releases it in the background (UnsentClaims#release).
   */
  @ParameterizedTest
  @ValueSource(strings = {"blocking", "async"})
  void aReleaseTimedOutWhileRedisStalledFreesTheKeyOnceRedisIsBack(String how) throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false)) {
      RedisKeyStore store = open(redis);
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      String key = "stalled-release:" + System.nanoTime();
      AtomicInteger sends = new AtomicInteger();
      boolean resumed = false;
      try {
        if (how.equals("blocking")) {
          assertThatThrownBy(
                  () ->
                      guard.execute(
                          key,
                          TTL,
                          ctx -> {
                            redis.pause();
                            throw new IllegalStateException("provider down");
                          }))
              .hasMessage("provider down");
        } else {
          CompletableFuture<String> stage =
              guard
                  .executeAsync(
                      key,
                      TTL,
                      ctx -> {
                        redis.pause();
                        return CompletableFuture.<String>failedFuture(
                            new IllegalStateException("provider down"));
                      })
                  .toCompletableFuture();
          assertThatThrownBy(() -> stage.get(60, TimeUnit.SECONDS))
              .isInstanceOf(ExecutionException.class)
              .hasRootCauseMessage("provider down");
        }
        redis.resume();
        resumed = true;
        Poll.within(StalledClaims.TAKE_BACK_WAIT)
            .ignoring(KeyStoreException.class)
            .until("the released key holds no record", () -> guard.find(key), f -> f.isEmpty());
        assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
            .as("a retry once Redis is back sends")
            .isEqualTo("n_1");
      } finally {
        if (!resumed) {
          redis.resume();
        }
        guard.close();
        store.close();
      }
    }
  }

  private static boolean ended(List<IdempotencyEvent.Type> events) {
    return events.contains(IdempotencyEvent.Type.OUTCOME_RECORDED_LATE)
        || events.contains(IdempotencyEvent.Type.OUTCOME_ABANDONED);
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
