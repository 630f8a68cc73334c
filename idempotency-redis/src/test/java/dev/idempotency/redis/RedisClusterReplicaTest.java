package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.testservers.EmbeddedRedisCluster;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@code waitForReplicas} on a Redis Cluster whose first master has a replica and whose others have
 * none. {@code WAIT} counts the writes of the connection it is sent on, so it must go to the
 * connection that wrote the claim, the one to the key's master: sent anywhere else it answers at
 * once with whatever replicas that node has, acknowledging claims no replica holds.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisClusterReplicaTest {

  private EmbeddedRedisCluster cluster;
  private RedisClusterClient client;

  @BeforeAll
  void startCluster() throws Exception {
    cluster = new EmbeddedRedisCluster(true);
    client = RedisClusterClient.create(cluster.uris());
  }

  @AfterAll
  void stopCluster() throws Exception {
    if (client != null) {
      client.shutdown();
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  /** A key id whose record lives on master {@code node} (0, 1 or 2). */
  private static String keyIdOn(RedisKeyStore store, int node) {
    int slotsPerNode = 16384 / EmbeddedRedisCluster.NODES;
    while (true) {
      String keyId = UUID.randomUUID().toString().replace("-", "");
      int slot = SlotHash.getSlot(store.redisKey(keyId));
      if (Math.min(slot / slotsPerNode, EmbeddedRedisCluster.NODES - 1) == node) {
        return keyId;
      }
    }
  }

  private static ClaimRequest claim(String keyId) {
    return new ClaimRequest(
        keyId,
        UUID.randomUUID().toString(),
        "",
        Instant.now(),
        Duration.ofMinutes(10),
        Duration.ofHours(1),
        true,
        null);
  }

  @Test
  void aClaimOnTheReplicatedMasterIsAcknowledgedAndOneOnAnUnreplicatedMasterIsReleased() {
    try (RedisKeyStore store =
            RedisKeyStore.builder(client).waitForReplicas(1, Duration.ofMillis(500)).build();
        RedisKeyStore plain = RedisKeyStore.builder(client).build()) {
      String replicated = keyIdOn(store, 0);
      String[] unreplicated = {keyIdOn(store, 1), keyIdOn(store, 2)};

      assertThat(store.claim(claim(replicated))).isEqualTo(new ClaimResult.Claimed(1, false));
      long onReplica =
          EmbeddedRedisCluster.onNode(
              cluster.replicaPort,
              replica -> {
                replica.readOnly();
                return replica.exists(store.redisKey(replicated));
              });
      assertThat(onReplica).as("the replica holds the acknowledged claim").isEqualTo(1);
      for (String keyId : unreplicated) {
        assertThatThrownBy(() -> store.claim(claim(keyId)))
            .isInstanceOf(KeyStoreException.class)
            .hasMessageContaining("acknowledged by 0 of 1 replicas");
        assertThat(plain.claim(claim(keyId)))
            .as("a claim no replica acknowledged was released")
            .isEqualTo(new ClaimResult.Claimed(1, false));
      }
    }
  }

  /**
   * The release of a claim no replica acknowledged is done when the claim fails, not sent on its
   * way: a caller who retries at once, from any connection, must find the key free.
   */
  @Test
  void aClaimNoReplicaAcknowledgedIsAlreadyReleasedWhenTheClaimFails() {
    try (RedisKeyStore store =
            RedisKeyStore.builder(client).waitForReplicas(1, Duration.ofMillis(20)).build();
        StatefulRedisClusterConnection<String, String> reader = client.connect()) {
      for (int node = 1; node < EmbeddedRedisCluster.NODES; node++) {
        reader.sync().exists(store.redisKey(keyIdOn(store, node)));
      }
      for (int i = 0; i < 40; i++) {
        String keyId = keyIdOn(store, 1 + i % 2);
        assertThatThrownBy(() -> store.claim(claim(keyId)))
            .hasMessageContaining("acknowledged by 0 of 1 replicas");
        assertThat(reader.sync().exists(store.redisKey(keyId)))
            .as("the record of claim %d once its claim has failed", i)
            .isZero();
      }
    }
  }
}
