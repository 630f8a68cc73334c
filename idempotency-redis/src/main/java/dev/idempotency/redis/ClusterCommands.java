package dev.idempotency.redis;

import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import java.util.concurrent.CompletableFuture;

/**
 * {@link StoreCommands} on a Redis Cluster: every command touches one key, so Lettuce routes it to
 * the master of the key's slot, and a script may not touch many keys.
 */
final class ClusterCommands extends LettuceCommands {

  private final StatefulRedisClusterConnection<String, byte[]> connection;

  ClusterCommands(StatefulRedisClusterConnection<String, byte[]> connection) {
    super(connection, connection.async());
    this.connection = connection;
  }

  /**
   * {@code WAIT} on the connection Lettuce routes the key's writes through: the one to its slot's
   * master by host and port (Lettuce keys its write connections that way, not by node id).
   */
  @Override
  public CompletableFuture<Long> waitForReplication(String key, int replicas, long timeoutMillis) {
    RedisClusterNode master = connection.getPartitions().getMasterBySlot(SlotHash.getSlot(key));
    if (master == null) {
      return CompletableFuture.failedFuture(
          new IllegalStateException("no master is known for the slot of the key"));
    }
    return connection
        .getConnectionAsync(master.getUri().getHost(), master.getUri().getPort())
        .thenCompose(node -> node.async().waitForReplication(replicas, timeoutMillis));
  }

  @Override
  public boolean multiKeyScripts() {
    return false;
  }
}
