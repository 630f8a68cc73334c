package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.KeyStoreException;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link RedisUnreadableBatchCases} on standalone Redis, where a batch is one script call; and a
 * Redis that refuses writes, whose batch still fails as a whole with a store error.
 */
class RedisUnreadableBatchTest extends RedisUnreadableBatchCases<RedisCommands<String, String>> {

  private StandaloneRedis redis;
  private RedisKeyStore store;

  @BeforeAll
  void startRedis() throws Exception {
    redis = StandaloneRedis.start();
    store = newStore("unreadable-batch:");
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
  RedisKeyStore store() {
    return store;
  }

  @Override
  RedisKeyStore newStore(String keyPrefix) {
    return RedisKeyStore.builder(redis.client()).keyPrefix(keyPrefix).build();
  }

  @Override
  RedisCommands<String, String> admin() {
    return redis.admin();
  }

  @Test
  void aRedisRefusingWritesStillFailsTheWholeBatchAsAStoreError() {
    List<ClaimRequest> claims = claimThree();
    redis.admin().configSet("maxmemory", "1");
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
      redis.admin().configSet("maxmemory", "0");
    }
    assertThat(store.completeAll(claims.stream().map(this::completion).toList()))
        .containsExactly(true, true, true);
  }
}
