package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.tck.StoreRecovery;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

/**
 * SPEC section 14 on the Redis store: a service whose Redis is down when it starts still builds its
 * store; each call fails closed, and the store works once Redis is up, without a restart.
 */
class RedisStoreAvailabilityTest {

  static final Duration TTL = Duration.ofHours(1);

  @Test
  void aStoreBuiltWhileRedisIsDownFailsClosedThenWorksOnceItIsUp() throws Exception {
    int port = FreePorts.next();
    RedisClient client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    RedisServer server = null;
    try (RedisKeyStore store = RedisKeyStore.builder(client).build()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();

      assertThat(store.isConnected()).isFalse();
      long start = System.nanoTime();
      assertThatThrownBy(() -> guard.execute("down:" + UUID.randomUUID(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
      long failedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

      server =
          RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
      server.start();
      String key = "up:" + UUID.randomUUID();
      String sent = StoreRecovery.sendOnceTheStoreAnswers(guard, key, TTL, Duration.ofSeconds(60));

      assertThat(failedAfterMillis).as("fails within the operation timeout").isLessThan(5_000);
      assertThat(sent).isEqualTo("sent");
      assertThat(guard.execute(key, TTL, ctx -> "again")).isEqualTo("sent");
      assertThat(store.isConnected()).isTrue();
      assertThat(guard.find(key)).isPresent();
    } finally {
      client.shutdown();
      if (server != null) {
        server.stop();
      }
    }
  }
}
