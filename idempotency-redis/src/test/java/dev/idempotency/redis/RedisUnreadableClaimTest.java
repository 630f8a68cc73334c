package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.ResultCodec;
import dev.idempotency.UnreadableRecordException;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
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
 * for the other keys.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisUnreadableClaimTest {

  static final Duration TTL = Duration.ofHours(1);
  static final int ROUNDS = 10;

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

  @Test
  void aClaimOfAnUnreadableRecordDoesNotRefuseOtherKeys() {
    String prefix = "unreadable-claim-" + UUID.randomUUID() + ":";
    try (RedisKeyStore store = RedisKeyStore.builder(client).keyPrefix(prefix).build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = damagedKey(guard, prefix);

      AtomicInteger damagedSends = new AtomicInteger();
      List<String> refusedOthers = new ArrayList<>();
      for (int round = 0; round < ROUNDS; round++) {
        assertThatThrownBy(
                () ->
                    guard.execute(
                        damaged,
                        TTL,
                        ctx -> {
                          damagedSends.incrementAndGet();
                          return "sent again";
                        }))
            .isInstanceOf(UnreadableRecordException.class)
            .hasMessageContaining("cannot read")
            .hasMessageContaining("nothing was sent");
        try {
          guard.execute("order:" + UUID.randomUUID(), TTL, ctx -> "other sent");
        } catch (KeyStoreException refused) {
          refusedOthers.add(refused.getMessage());
        }
      }

      assertThat(damagedSends).as("the unreadable key is never sent again").hasValue(0);
      assertThat(refusedOthers)
          .as("sends of healthy keys right after a claim of the unreadable key")
          .isEmpty();
    }
  }

  @Test
  void anAsyncClaimOrABatchOfAnUnreadableRecordDoesNotRefuseOtherKeys() throws Exception {
    String prefix = "unreadable-async-" + UUID.randomUUID() + ":";
    try (RedisKeyStore store = RedisKeyStore.builder(client).keyPrefix(prefix).build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      String damaged = damagedKey(guard, prefix);
      AtomicInteger damagedSends = new AtomicInteger();
      List<String> refusedOthers = new ArrayList<>();
      for (int round = 0; round < ROUNDS; round++) {
        CompletableFuture<String> damagedCall =
            guard
                .executeAsync(
                    damaged,
                    TTL,
                    ctx -> {
                      damagedSends.incrementAndGet();
                      return CompletableFuture.completedFuture("sent again");
                    })
                .toCompletableFuture();
        assertThatThrownBy(() -> damagedCall.get(30, TimeUnit.SECONDS))
            .hasCauseInstanceOf(UnreadableRecordException.class);

        String healthy = "order:" + UUID.randomUUID();
        try (Batch<String> batch =
            guard.claimBatch(
                List.of(IdempotencyRequest.of(damaged, TTL), IdempotencyRequest.of(healthy, TTL)),
                ResultCodec.string())) {
          assertThat(batch.refused().get(damaged)).isInstanceOf(UnreadableRecordException.class);
          assertThat(batch.claimedKeys()).containsExactly(healthy);
          for (Batch.Item item : batch.toSend()) {
            batch.succeeded(item, "batch sent");
          }
        }
        try {
          guard
              .executeAsync(
                  "order:" + UUID.randomUUID(), TTL, ctx -> CompletableFuture.completedFuture("x"))
              .toCompletableFuture()
              .get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException refused) {
          refusedOthers.add(String.valueOf(refused.getCause()));
        }
      }
      assertThat(damagedSends).as("the unreadable key is never sent again").hasValue(0);
      assertThat(refusedOthers)
          .as("async sends of healthy keys right after claims of the unreadable key")
          .isEmpty();
    }
  }

  @Test
  void aFailOpenGuardNeverSendsAnUnreadableKey() {
    String prefix = "unreadable-open-" + UUID.randomUUID() + ":";
    try (RedisKeyStore store = RedisKeyStore.builder(client).keyPrefix(prefix).build();
        IdempotencyGuard guard = IdempotencyGuard.builder().store(store).failOpen(true).build()) {
      String damaged = damagedKey(guard, prefix);
      AtomicInteger damagedSends = new AtomicInteger();
      assertThatThrownBy(
              () ->
                  guard.execute(
                      damaged,
                      TTL,
                      ctx -> {
                        damagedSends.incrementAndGet();
                        return "sent again";
                      }))
          .isInstanceOf(UnreadableRecordException.class);
      assertThat(damagedSends)
          .as("a record that may be a completed send is never sent")
          .hasValue(0);
    }
  }

  /** Sends a key, then overwrites its stored value with one that is not a record of the store. */
  private String damagedKey(IdempotencyGuard guard, String prefix) {
    String damaged = "order:" + UUID.randomUUID();
    assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
    List<String> stored = admin.sync().keys(prefix + "*");
    assertThat(stored).hasSize(1);
    admin.sync().set(stored.get(0), "not a record of this store", SetArgs.Builder.keepttl());
    return damaged;
  }
}
