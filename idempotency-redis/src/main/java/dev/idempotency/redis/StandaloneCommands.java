package dev.idempotency.redis;

import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import java.util.concurrent.CompletableFuture;

/** {@link StoreCommands} on one connection to a standalone Redis, or the master Sentinel names. */
final class StandaloneCommands extends LettuceCommands {

  private final RedisAsyncCommands<String, byte[]> redis;

  StandaloneCommands(StatefulRedisConnection<String, byte[]> connection) {
    super(connection, connection.async());
    this.redis = connection.async();
  }

  /** {@code WAIT} on the one connection, which wrote everything. */
  @Override
  public CompletableFuture<Long> waitForReplication(String key, int replicas, long timeoutMillis) {
    return redis.waitForReplication(replicas, timeoutMillis).toCompletableFuture();
  }

  @Override
  public boolean multiKeyScripts() {
    return true;
  }
}
