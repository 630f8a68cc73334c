package dev.idempotency.redis;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchesAbandonedRacingCloseContract;
import org.junit.jupiter.api.Tag;

/**
 * probeY (SPEC 1): {@link BatchesAbandonedRacingCloseContract} (the store test kit) on Redis
 * (embedded; server time, lease 2 s, guard B waits for the leases guard A left to run out):
 * abandoned batches on four threads report while the guard closes with a 20 ms grace; no sent key
 * left in progress, one send per key. 6 rounds; tagged extended for its length (the leases to wait
 * out, about 14 s), its in-memory twin {@code BatchesAbandonedRacingCloseProbeTest} runs by
 * default.
 */
@Tag("extended")
class RedisBatchesAbandonedRacingCloseProbeTest extends BatchesAbandonedRacingCloseContract {

  private StandaloneRedis redis;

  RedisBatchesAbandonedRacingCloseProbeTest() {
    super("redis-", 6);
  }

  @Override
  protected KeyStore newStore() {
    try {
      redis = StandaloneRedis.start();
    } catch (Exception e) {
      throw new IllegalStateException("could not start the embedded Redis", e);
    }
    return RedisKeyStore.builder(redis.client()).build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    ((RedisKeyStore) store).close();
    try {
      redis.close();
    } catch (Exception e) {
      throw new IllegalStateException("could not stop the embedded Redis", e);
    }
  }
}
