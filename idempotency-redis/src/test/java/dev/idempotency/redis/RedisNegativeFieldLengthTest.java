package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.RedisBinary;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.embedded.RedisExecProvider;
import redis.embedded.RedisServer;
import redis.embedded.util.OsArchitecture;

/**
 * A record whose in-progress head and owner token are intact but whose tail has a negative field
 * length ({@code I<n>:<owner>-3:}) is that key's error, never the store's (probeB's finding on
 * 04e49ff): {@code fields} in record-functions.lua read the length with {@code tonumber} and jumped
 * back to where it started, forever, appending to its table: no Lua error for {@code perKey}'s
 * {@code pcall} to catch, so a batch claim or the owner's lease renewal of that key ran until the
 * Lua VM could not allocate, and Redis answered every other client {@code BUSY} meanwhile (a claim
 * of a healthy key failed at its operation timeout). Now a length that is not a plain number, or a
 * field that runs past the value's end, fails the parse at once: the key's batch claim and its
 * renewal answer "unreadable" within their timeout, and other keys go on.
 *
 * <p>The server runs under {@code ulimit -v} (600 MB): were the loop ever back, the Lua VM's growth
 * would end in an allocation failure instead of taking memory from the machine.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisNegativeFieldLengthTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofMinutes(5);

  private Path wrapperDir;
  private RedisServer server;
  private RedisClient client;
  private StatefulRedisConnection<String, String> admin;
  private RedisKeyStore store;

  @BeforeAll
  void start() throws Exception {
    File binary = RedisBinary.provider().get();
    wrapperDir = Files.createTempDirectory("probeB-redis-ulimit");
    Path wrapper = wrapperDir.resolve("redis-server-limited");
    Files.writeString(
        wrapper,
        "#!/bin/sh\nulimit -v 600000\nexec '" + binary.getAbsolutePath() + "' \"$@\"\n",
        StandardCharsets.UTF_8);
    assertThat(wrapper.toFile().setExecutable(true)).isTrue();
    OsArchitecture here = OsArchitecture.detect();
    int port = FreePorts.next();
    server =
        RedisServer.builder()
            .redisExecProvider(
                RedisExecProvider.defaultProvider()
                    .override(here.os(), here.arch(), wrapper.toString()))
            .port(port)
            .setting("bind 127.0.0.1")
            .setting("save \"\"")
            .setting("lua-time-limit 1000")
            .build();
    RedisBinary.start(server);
    client = RedisClient.create(RedisURI.create("redis://127.0.0.1:" + port));
    admin = client.connect();
    store = RedisKeyStore.builder(client).keyPrefix("probe-negative:").build();
  }

  @AfterAll
  void stop() throws Exception {
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
    if (wrapperDir != null) {
      Files.deleteIfExists(wrapperDir.resolve("redis-server-limited"));
      Files.deleteIfExists(wrapperDir);
    }
  }

  @Test
  void aBatchClaimOfARecordWithANegativeFieldLengthFailsThatKeyAloneAtOnce() throws Exception {
    ClaimRequest damaged = damagedRecord();
    ClaimRequest healthy = claimRequest(UUID.randomUUID().toString().replace("-", ""));

    List<ClaimResult> results =
        CompletableFuture.supplyAsync(
                () -> store.claimAll(List.of(claimRequest(damaged.keyId()), healthy)))
            .get(10, TimeUnit.SECONDS);

    assertThat(results).hasSize(2);
    assertThat(results.get(0)).isInstanceOf(ClaimResult.Failed.class);
    assertThat(((ClaimResult.Failed) results.get(0)).error())
        .isInstanceOf(UnreadableRecordException.class);
    assertThat(results.get(1)).isInstanceOf(ClaimResult.Claimed.class);
    assertServerAnswersAtOnce();
  }

  /**
   * The owner's lease renewal of its own damaged record (extend.lua: the head and owner token are
   * intact, so it parses the record in Lua), as the guard's lease keeper sends it while the send
   * runs.
   */
  @Test
  void aRenewalOfARecordWithANegativeFieldLengthFailsThatKeyAloneAtOnce() throws Exception {
    ClaimRequest damaged = damagedRecord();

    CompletableFuture<Boolean> renewal =
        CompletableFuture.supplyAsync(
            () ->
                store.extend(
                    new dev.idempotency.spi.ExtendRequest(
                        damaged.keyId(), damaged.ownerToken(), LEASE, Instant.now())));

    assertThat(renewal.get(10, TimeUnit.SECONDS))
        .as("a value the script cannot read is not renewed (extend.lua answers 0)")
        .isFalse();
    assertServerAnswersAtOnce();
    assertThat(store.claim(claimRequest(UUID.randomUUID().toString().replace("-", ""))))
        .isInstanceOf(ClaimResult.Claimed.class);
  }

  /** A key claimed, then its value overwritten with the head, the owner token and a tail of -3. */
  private ClaimRequest damagedRecord() {
    ClaimRequest damaged = claimRequest(UUID.randomUUID().toString().replace("-", ""));
    assertThat(store.claim(damaged)).isInstanceOf(ClaimResult.Claimed.class);
    String owner = damaged.ownerToken();
    admin
        .sync()
        .set(
            store.redisKey(damaged.keyId()),
            "I" + owner.length() + ":" + owner + "-3:",
            SetArgs.Builder.keepttl());
    return damaged;
  }

  /** A PING on another connection is answered within 200 ms: no script holds the server. */
  private void assertServerAnswersAtOnce() throws Exception {
    assertThat(admin.async().ping().get(200, TimeUnit.MILLISECONDS)).isEqualTo("PONG");
  }

  private static ClaimRequest claimRequest(String keyId) {
    return new ClaimRequest(
        keyId, UUID.randomUUID().toString(), "", Instant.now(), LEASE, TTL, true, null);
  }
}
