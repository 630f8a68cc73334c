package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreFactory;
import dev.idempotency.tck.SharedKeyStoreContract;
import dev.idempotency.testservers.EmbeddedRedisCluster;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.sync.RedisAdvancedClusterCommands;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** The contract on a real three-master Redis Cluster, started by the test. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisClusterKeyStoreTest extends SharedKeyStoreContract {

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

  /** probeL: the take-back raced by renewals, completions and third callers, on the cluster. */
  @Nested
  class TakeBackRaces extends dev.idempotency.tck.TakeBackRaceProbe {
    @Override
    protected KeyStore store() {
      return RedisClusterKeyStoreTest.this.store();
    }
  }

  /** The guard's promises on this store. */
  @Nested
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return RedisClusterKeyStoreTest.this.store();
    }

    /** The completion then meets NOSCRIPT and loads its script again, as after a failover. */
    @Override
    protected void beforeAnInterruptedOutcomeIsWritten() {
      try (var admin = client.connect()) {
        admin.sync().upstream().commands().scriptFlush();
      }
    }
  }

  /** A record the store cannot read, in a cluster's batches (pipelines of single-key scripts). */
  @Nested
  class UnreadableRecords
      extends RedisUnreadableBatchCases<RedisAdvancedClusterCommands<String, String>> {
    private StatefulRedisClusterConnection<String, String> admin;

    @BeforeAll
    void connect() {
      admin = client.connect();
    }

    @AfterAll
    void disconnect() {
      admin.close();
    }

    @Override
    RedisKeyStore store() {
      return store;
    }

    @Override
    RedisKeyStore newStore(String keyPrefix) {
      return RedisKeyStore.builder(client).keyPrefix(keyPrefix).build();
    }

    @Override
    RedisAdvancedClusterCommands<String, String> admin() {
      return admin.sync();
    }
  }

  @Override
  protected Class<? extends KeyStoreFactory> factoryClass() {
    return RedisStoreFactory.class;
  }

  @Override
  protected String factoryConfig() {
    return "cluster:"
        + cluster.ports.stream()
            .map(port -> "redis://127.0.0.1:" + port)
            .collect(Collectors.joining(","));
  }

  /** Which node (by index) owns a slot, given the even split the cluster was built with. */
  private static int nodeOf(String redisKey) {
    int slot = SlotHash.getSlot(redisKey);
    return Math.min(slot / (16384 / EmbeddedRedisCluster.NODES), EmbeddedRedisCluster.NODES - 1);
  }

  @Test
  void everyOperationWorksOnEachOfTheThreeMasters() {
    Map<Integer, String> keyIdPerNode = new HashMap<>();
    while (keyIdPerNode.size() < EmbeddedRedisCluster.NODES) {
      String keyId = newKeyId();
      keyIdPerNode.putIfAbsent(nodeOf(store.redisKey(keyId)), keyId);
    }

    keyIdPerNode.forEach(
        (node, keyId) -> {
          String owner = newToken();
          assertThat(store.claim(claim(keyId, owner))).isEqualTo(new ClaimResult.Claimed(1, false));
          assertThat(store.release(keyId, owner)).isTrue();
          String second = newToken();
          ClaimRequest shortLease =
              new ClaimRequest(
                  keyId,
                  second,
                  "",
                  Instant.now(),
                  Duration.ofMillis(200),
                  Duration.ofHours(1),
                  true,
                  null);
          assertThat(store.claim(shortLease)).isEqualTo(new ClaimResult.Claimed(1, false));
          ClaimResult takeover =
              claimAfter(
                  shortLease.withOwnerToken(newToken()),
                  Duration.ofMillis(201),
                  r -> r instanceof ClaimResult.Claimed);
          assertThat(takeover).isEqualTo(new ClaimResult.Claimed(2, true));
          assertThat(store.complete(complete(keyId, second, bytes("stale")))).isFalse();
          String exists =
              EmbeddedRedisCluster.onNode(
                  cluster.ports.get(node), redis -> redis.type(store.redisKey(keyId)));
          assertThat(exists).as("record lives on node %d", node).isEqualTo("string");
        });
  }

  @Test
  void keysSpreadOverAllThreeMasters() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    AtomicInteger sends = new AtomicInteger();
    for (int i = 0; i < 300; i++) {
      String key = IdempotencyKey.of("spread", Integer.toString(i), newKeyId());
      guard.execute(key, Duration.ofHours(1), ctx -> "n_" + sends.incrementAndGet());
      guard.execute(key, Duration.ofHours(1), ctx -> "n_" + sends.incrementAndGet());
    }

    assertThat(sends).hasValue(300);
    for (int port : cluster.ports) {
      long keys = EmbeddedRedisCluster.onNode(port, RedisCommands::dbsize);
      assertThat(keys).as("records on the master at port %d", port).isGreaterThan(50);
    }
  }

  @Test
  void firstSendCostsTwoCommandsAndAReplayOneOnTheCluster() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    for (int i = 0; i < 10; i++) {
      guard.execute("warm-up:" + newKeyId(), Duration.ofHours(1), ctx -> "scripts loaded");
    }
    String key = "count:" + newKeyId();

    Map<String, Long> firstSend;
    Map<String, Long> replay;
    try (ClientCommands commands = ClientCommands.watch(cluster.ports)) {
      firstSend = commands.during(() -> guard.execute(key, Duration.ofHours(1), ctx -> "n_1"));
      replay = commands.during(() -> guard.execute(key, Duration.ofHours(1), ctx -> "n_2"));
    }

    assertThat(firstSend).containsOnly(Map.entry("set", 1L), Map.entry("evalsha", 1L));
    assertThat(replay).containsOnly(Map.entry("set", 1L));
  }

  @Test
  void completedRecordIsReplayedFromItsMaster() {
    String keyId = newKeyId();
    String owner = newToken();
    store.claim(claim(keyId, owner));
    store.complete(complete(keyId, owner, bytes("n_801")));

    ClaimResult replay = store.claim(claim(keyId, newToken()));

    assertThat(replay).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) replay).record().state()).isEqualTo(RecordState.COMPLETED);
    assertThat(((ClaimResult.Existing) replay).record().payload()).isEqualTo(bytes("n_801"));
  }
}
