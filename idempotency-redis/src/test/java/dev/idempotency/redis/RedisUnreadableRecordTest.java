package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.UnreadableRecordException;
import io.lettuce.core.SetArgs;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Issue 37 (SPEC 14): a lookup or deletion of one record that the store holds but cannot read (its
 * value is not one of the store's records) is that operation's error. The store answered, so it is
 * not an outage: the guard's breaker stays closed and a send of another key right after goes to the
 * store, instead of being refused at once (503 over HTTP) until the guard's next probe.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisUnreadableRecordTest {

  static final Duration TTL = Duration.ofHours(1);

  private StandaloneRedis redis;

  @BeforeAll
  void startRedis() throws Exception {
    redis = StandaloneRedis.start();
  }

  @AfterAll
  void stopRedis() throws Exception {
    if (redis != null) {
      redis.close();
    }
  }

  @Test
  void aLookupOfAnUnreadableRecordFailsAloneAndTheNextSendGoesToTheStore() {
    String prefix = "unreadable-" + UUID.randomUUID() + ":";
    try (RedisKeyStore store = RedisKeyStore.builder(redis.client()).keyPrefix(prefix).build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = "order:" + UUID.randomUUID();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
      List<String> stored = redis.admin().keys(prefix + "*");
      assertThat(stored).as("the one record written under the prefix").hasSize(1);
      redis.admin().set(stored.get(0), "not a record of this store", SetArgs.Builder.keepttl());

      assertThatThrownBy(() -> guard.find(damaged))
          .isInstanceOf(UnreadableRecordException.class)
          .hasMessageContaining("not one of its records");
      String other = "order:" + UUID.randomUUID();

      assertThat(guard.execute(other, TTL, ctx -> "other sent"))
          .as("a send right after the failed lookup is not refused as during an outage")
          .isEqualTo("other sent");
      assertThat(guard.find(other)).isPresent();
      assertThat(guard.forget(damaged)).as("an operator can delete the unreadable record").isTrue();
      assertThat(guard.execute(damaged, TTL, ctx -> "sent again")).isEqualTo("sent again");
    }
  }
}
