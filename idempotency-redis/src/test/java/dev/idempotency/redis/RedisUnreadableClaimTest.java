package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.UnreadableRecordContract;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.TestInstance;
import redis.embedded.RedisServer;

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

  private RedisServer server;
  private RedisClient client;
  private StatefulRedisConnection<String, String> admin;

  @BeforeAll
  void startRedis() throws Exception {
    int port = FreePorts.next();
    server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    admin = client.connect();
  }

  @AfterAll
  void stopRedis() throws Exception {
    if (admin != null) {
      admin.close();
      client.shutdown();
    }
    if (server != null) {
      server.stop();
    }
  }

  @Override
  protected KeyStore newStore(String name) {
    return RedisKeyStore.builder(client).keyPrefix(prefix(name)).build();
  }

  /** Overwrites the stored value with one that is not a record of this store. */
  @Override
  protected void damageTheOnlyRecord(String name) {
    List<String> stored = admin.sync().keys(prefix(name) + "*");
    assertThat(stored).hasSize(1);
    admin.sync().set(stored.get(0), "not a record of this store", SetArgs.Builder.keepttl());
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
      List<String> stored = admin.sync().keys(prefix(name) + "*");
      assertThat(stored).hasSize(1);
      admin.sync().del(stored.get(0));
      admin.sync().hset(stored.get(0), "field", "not a record of this store");
    }
  }

  private static String prefix(String name) {
    return "unreadable-" + name + ":";
  }
}
