package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.testservers.EmbeddedRedisCluster;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisSentinel;
import redis.embedded.RedisServer;

/** Sentinel wiring: the store finds the master through a real redis-sentinel and works on it. */
class RedisSentinelKeyStoreTest {

  @Test
  void storeBuiltFromASentinelUriClaimsAndReplaysOnTheMaster() throws Exception {
    int masterPort = FreePorts.next();
    int sentinelPort = FreePorts.next();
    RedisServer master =
        RedisServer.builder()
            .port(masterPort)
            .setting("bind 127.0.0.1")
            .setting("save \"\"")
            .build();
    RedisSentinel sentinel =
        RedisSentinel.builder()
            .bind("127.0.0.1")
            .port(sentinelPort)
            .masterPort(masterPort)
            .masterName("notify")
            .quorumSize(1)
            .build();
    master.start();
    sentinel.start();
    RedisClient client =
        RedisClient.create(RedisURI.Builder.sentinel("127.0.0.1", sentinelPort, "notify").build());
    try (RedisKeyStore store = RedisKeyStore.builder(client).build()) {
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      String key = IdempotencyKey.of("otp", "user_42", "sentinel");
      AtomicInteger sends = new AtomicInteger();

      String first = guard.execute(key, Duration.ofHours(1), ctx -> "n_" + sends.incrementAndGet());
      String retry = guard.execute(key, Duration.ofHours(1), ctx -> "n_" + sends.incrementAndGet());

      assertThat(first).isEqualTo("n_1");
      assertThat(retry).isEqualTo("n_1");
      long onMaster =
          EmbeddedRedisCluster.onNode(
              masterPort, redis -> redis.exists(store.redisKey(IdempotencyKey.digest(key))));
      assertThat(onMaster).isEqualTo(1);
    } finally {
      client.shutdown();
      sentinel.stop();
      master.stop();
    }
  }
}
