package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreContract;
import dev.idempotency.testservers.FreePorts;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.embedded.RedisServer;

/**
 * The contract on the path Redis before 7.0 takes, where {@code SET} cannot combine {@code NX} and
 * {@code GET}: every claim is the claim script. Run on a real redis-server 7.0 with that path
 * forced, and mixed with a store on the fast path over the same records.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisScriptClaimsKeyStoreTest extends KeyStoreContract {

  private RedisServer server;
  private int port;
  private RedisClient client;
  private RedisKeyStore scriptsOnly;
  private RedisKeyStore fast;

  @BeforeAll
  void startRedis() {
    port = FreePorts.next();
    server =
        RedisServer.builder().port(port).setting("bind 127.0.0.1").setting("save \"\"").build();
    server.start();
    client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    scriptsOnly = RedisKeyStore.builder(client).scriptClaimsOnly().build();
    fast = RedisKeyStore.builder(client).build();
  }

  @AfterAll
  void stopRedis() {
    if (client != null) {
      scriptsOnly.close();
      fast.close();
      client.shutdown();
    }
    if (server != null) {
      server.stop();
    }
  }

  @Override
  protected KeyStore store() {
    return scriptsOnly;
  }

  /** The guard's promises on this store. */
  @Nested
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return RedisScriptClaimsKeyStoreTest.this.store();
    }
  }

  @Test
  void aReplayIsOneScriptCallAndNoSet() {
    String keyId = newKeyId();
    String owner = newToken();
    scriptsOnly.claim(claim(keyId, owner));
    scriptsOnly.complete(complete(keyId, owner, "n_1".getBytes(StandardCharsets.UTF_8)));

    Map<String, Long> replay;
    try (ClientCommands commands = ClientCommands.watch(List.of(port))) {
      replay = commands.during(() -> scriptsOnly.claim(claim(keyId, newToken())));
    }

    assertThat(replay).containsOnly(Map.entry("evalsha", 1L));
  }

  @Test
  void bothPathsReadAndFenceTheSameRecords() {
    String keyId = newKeyId();
    String owner = newToken();
    assertThat(scriptsOnly.claim(claim(keyId, owner))).isInstanceOf(ClaimResult.Claimed.class);

    ClaimResult whileInProgress = fast.claim(claim(keyId, newToken()));
    assertThat(fast.complete(complete(keyId, owner, "n_2".getBytes(StandardCharsets.UTF_8))))
        .isTrue();
    ClaimResult afterwards = scriptsOnly.claim(claim(keyId, newToken()));

    assertThat(whileInProgress).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) whileInProgress).record().state())
        .isEqualTo(RecordState.IN_PROGRESS);
    assertThat(afterwards).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) afterwards).record().payload())
        .isEqualTo("n_2".getBytes(StandardCharsets.UTF_8));
  }
}
