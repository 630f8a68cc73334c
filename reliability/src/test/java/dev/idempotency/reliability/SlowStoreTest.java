package dev.idempotency.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jdbi.v3.core.Jdbi;
import org.junit.jupiter.api.Test;

/**
 * A proxy between the guard and the store delays or drops traffic: slow calls still succeed,
 * dropped ones fail with {@link KeyStoreException} within the configured timeout, no sender runs on
 * a failed claim, and no thread hangs.
 */
class SlowStoreTest {

  static final Duration TTL = Duration.ofHours(1);

  final AtomicInteger sends = new AtomicInteger();

  /** Runs one call on its own thread and fails the test if it outlives {@code bound}. */
  Object callBounded(IdempotencyGuard guard, Duration bound) throws Exception {
    long start = System.nanoTime();
    CompletableFuture<Object> call =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return guard.execute(
                    "slow:" + UUID.randomUUID(), TTL, ctx -> "n_" + sends.incrementAndGet());
              } catch (RuntimeException e) {
                return e;
              }
            });
    Object result = call.get(bound.toSeconds(), TimeUnit.SECONDS);
    System.out.printf(
        "call returned %s after %d ms%n",
        result instanceof Exception ? result.getClass().getSimpleName() : "a result",
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
    return result;
  }

  @Test
  void redisBehindADelayingThenDroppingProxy() throws Exception {
    try (RestartableRedis redis = new RestartableRedis(false);
        DelayProxy proxy = new DelayProxy(redis.port)) {
      Duration timeout = Duration.ofMillis(500);
      RedisKeyStore store =
          RedisKeyStore.builder(Stores.redisClient("redis://127.0.0.1:" + proxy.port(), timeout))
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();

      proxy.delay(50);
      assertThat(callBounded(guard, Duration.ofSeconds(30))).isEqualTo("n_1");

      proxy.drop();
      for (int i = 0; i < 3; i++) {
        assertThat(callBounded(guard, Duration.ofSeconds(10)))
            .isInstanceOf(KeyStoreException.class);
      }
      assertThat(sends).as("no sender ran on a failed claim").hasValue(1);
    }
  }

  @Test
  void postgresBehindADelayingThenDroppingProxy() throws Exception {
    try (RestartablePostgres postgres = new RestartablePostgres();
        DelayProxy proxy = new DelayProxy(postgres.port)) {
      assertThat(
              JdbcKeyStore.builder(Jdbi.create(postgres.url()))
                  .tableName("idem_slow")
                  .createSchemaIfMissing(true)
                  .build()
                  .tableExists())
          .as("the table, created on the first use of the direct store")
          .isTrue();
      String viaProxy =
          "jdbc:postgresql://127.0.0.1:"
              + proxy.port()
              + "/postgres?user=postgres&connectTimeout=2&socketTimeout=2&loginTimeout=2";
      JdbcKeyStore store =
          JdbcKeyStore.builder(Jdbi.create(viaProxy)).tableName("idem_slow").build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();

      proxy.delay(20);
      assertThat(callBounded(guard, Duration.ofSeconds(60))).isEqualTo("n_1");

      proxy.drop();
      for (int i = 0; i < 2; i++) {
        assertThat(callBounded(guard, Duration.ofSeconds(20)))
            .isInstanceOf(KeyStoreException.class);
      }
      assertThat(sends).as("no sender ran on a failed claim").hasValue(1);
    }
  }
}
