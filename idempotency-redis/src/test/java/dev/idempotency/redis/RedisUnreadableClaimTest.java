package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.UnreadableRecordContract;
import io.lettuce.core.SetArgs;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression test of probe42h's finding (lazy37b's fix, SPEC 14): a record the store holds but
 * cannot read is that key's error, "the store answered, so the breaker stays closed and other calls
 * go on". The fix covers lookups and deletions; this probe sends (claims) the unreadable key
 * itself, as a client retrying it would, and right after each attempt sends another key. Each claim
 * of the damaged key opens the guard's breaker, and the next send of a healthy key is refused at
 * once ("the redis key store is failing"): one damaged record refused every key's sends while it
 * was retried. Now a claim of it, blocking, async or in a batch, fails with {@link
 * UnreadableRecordException} (nothing sent for it, fail-open or not) and the breaker stays closed
 * for the other keys ({@link UnreadableRecordContract}, a key prefix per test).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisUnreadableClaimTest extends UnreadableRecordContract {

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

  @Override
  protected KeyStore newStore(String name) {
    return RedisKeyStore.builder(redis.client()).keyPrefix(prefix(name)).build();
  }

  /** Overwrites the stored value with one that is not a record of this store. */
  @Override
  protected void damageTheOnlyRecord(String name) {
    List<String> stored = redis.admin().keys(prefix(name) + "*");
    assertThat(stored).hasSize(1);
    redis.admin().set(stored.get(0), "not a record of this store", SetArgs.Builder.keepttl());
  }

  /**
   * The same with a key of another Redis type (a hash) in place of the record: every string command
   * on it answers WRONGTYPE, which was a plain store error (the breaker opened for every key)
   * before the claim, the lookup and the scripts read it as that key's unreadable record.
   */
  @Nested
  class AnotherRedisType extends UnreadableRecordContract {
    @Override
    protected KeyStore newStore(String name) {
      return RedisUnreadableClaimTest.this.newStore(name);
    }

    @Override
    protected void damageTheOnlyRecord(String name) {
      List<String> stored = redis.admin().keys(prefix(name) + "*");
      assertThat(stored).hasSize(1);
      redis.admin().del(stored.get(0));
      redis.admin().hset(stored.get(0), "field", "not a record of this store");
    }
  }

  private static String prefix(String name) {
    return "unreadable-" + name + ":";
  }
}
