package dev.idempotency.redis;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * probeL: take-back.lua raced by extend.lua, extend-batch.lua, complete.lua and third callers'
 * claims on a real standalone Redis (server time: short real leases).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisTakeBackRaceProbeTest extends TakeBackRaceProbe {

  private StandaloneRedis redis;
  private RedisKeyStore store;

  @BeforeAll
  void startRedis() throws Exception {
    redis = StandaloneRedis.start();
    store = RedisKeyStore.builder(redis.client()).build();
  }

  @AfterAll
  void stopRedis() throws Exception {
    if (store != null) {
      store.close();
    }
    if (redis != null) {
      redis.close();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }
}
