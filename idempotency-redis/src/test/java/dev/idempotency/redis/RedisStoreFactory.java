package dev.idempotency.redis;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.KeyStoreFactory;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.Arrays;

/**
 * Opens the Redis store in the second JVM of the cross-process race. Config: a Redis URI, or {@code
 * cluster:} followed by comma-separated node URIs.
 */
public final class RedisStoreFactory implements KeyStoreFactory {

  @Override
  public KeyStore open(String config) {
    RedisKeyStore store;
    if (config.startsWith("cluster:")) {
      RedisClusterClient client =
          RedisClusterClient.create(
              Arrays.stream(config.substring(8).split(",")).map(RedisURI::create).toList());
      store = RedisKeyStore.builder(client).build();
    } else {
      store = RedisKeyStore.builder(RedisClient.create(config)).build();
    }
    // the race is about claims, not about connecting: connect before the race starts
    if (!store.awaitConnection(Duration.ofSeconds(60))) {
      throw new IllegalStateException("the second process could not connect to Redis");
    }
    return store;
  }
}
