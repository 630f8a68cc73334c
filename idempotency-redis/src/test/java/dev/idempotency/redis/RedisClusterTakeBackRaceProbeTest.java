package dev.idempotency.redis;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;
import dev.idempotency.testservers.EmbeddedRedisCluster;
import io.lettuce.core.cluster.RedisClusterClient;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * probeL: take-back.lua (one key, routed by its slot) raced by renewals, completions and third
 * callers' claims on a real three-master Redis Cluster, keys spread over the slots.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisClusterTakeBackRaceProbeTest extends TakeBackRaceProbe {

  private EmbeddedRedisCluster cluster;
  private RedisClusterClient client;
  private RedisKeyStore store;

  @BeforeAll
  void startCluster() throws Exception {
    cluster = new EmbeddedRedisCluster();
    client = RedisClusterClient.create(cluster.uris());
    store = RedisKeyStore.builder(client).build();
  }

  @AfterAll
  void stopCluster() throws Exception {
    if (store != null) {
      store.close();
      client.shutdown();
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }
}
