package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.KeyStoreException;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

/**
 * {@link RedisUnreadableBatchCases} on standalone Redis, where a batch is one script call; and a
 * Redis that refuses writes, whose batch still fails as a whole with a store error.
 */
class RedisUnreadableBatchTest extends RedisUnreadableBatchCases<RedisCommands<String, String>> {

  private RedisServer server;
  private RedisClient client;
  private StatefulRedisConnection<String, String> admin;
  private RedisKeyStore store;

  @BeforeAll
  void startRedis() throws Exception {
    int port = FreePorts.next();
    server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    admin = client.connect();
    store = newStore("unreadable-batch:");
  }

  @AfterAll
  void stopRedis() throws Exception {
    if (store != null) {
      store.close();
    }
    if (admin != null) {
      admin.close();
      client.shutdown();
    }
    if (server != null) {
      server.stop();
    }
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
  RedisCommands<String, String> admin() {
    return admin.sync();
  }

  @Test
  void aRedisRefusingWritesStillFailsTheWholeBatchAsAStoreError() {
    List<ClaimRequest> claims = claimThree();
    admin.sync().configSet("maxmemory", "1");
    try {
      assertThatThrownBy(() -> store.completeAll(claims.stream().map(this::completion).toList()))
          .as("out of memory is an outage, not one unreadable record")
          .isInstanceOf(KeyStoreException.class)
          .isNotInstanceOf(UnreadableRecordException.class);
      assertThatThrownBy(() -> store.claimAll(List.of(claimRequest(), claimRequest())))
          .isInstanceOf(KeyStoreException.class)
          .isNotInstanceOf(UnreadableRecordException.class);
      assertThatThrownBy(() -> store.complete(completion(claims.get(0))))
          .isInstanceOf(KeyStoreException.class)
          .isNotInstanceOf(UnreadableRecordException.class);
    } finally {
      admin.sync().configSet("maxmemory", "0");
    }
    assertThat(store.completeAll(claims.stream().map(this::completion).toList()))
        .containsExactly(true, true, true);
  }
}
