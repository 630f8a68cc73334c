package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.embedded.RedisExecProvider;
import redis.embedded.RedisServer;
import redis.embedded.util.OsArchitecture;

/**
 * Probe (probeB) of 04e49ff ("a value the scripts cannot read fails its own key only"; docs/
 * stores.md: "that key's error, never the store's ... the guard's breaker stays closed"): a
 * record's in-progress head and owner token with a broken tail whose next field length is negative
 * ({@code I<n>:<owner>-3:}). {@code fields} in record-functions.lua then jumps back to the same
 * position forever ({@code i = colon + n + 1}), appending to its table on every turn: no Lua error
 * for {@code pcall} to catch, so the claim script runs until the Lua VM cannot allocate (Redis
 * answers every other client {@code BUSY} meanwhile, after {@code lua-time-limit}), and only then
 * does {@code perKey} answer "unreadable" for the key.
 *
 * <p>The promise probed: while a batch claim of the damaged key runs (the single claim refuses it
 * in Java, from its {@code SET NX GET} reply; the batch script and the owner's renewals parse it in
 * Lua), a claim of another key through the same store succeeds. The server runs under {@code ulimit
 * -v} (600 MB) so that the Lua VM's growth ends in an allocation failure instead of taking memory
 * from the machine.
 */
@Tag("open-finding")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedisNegativeFieldLengthProbeTest {

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
  void aClaimOfARecordWithANegativeFieldLengthDoesNotStopTheOtherKeys() throws Exception {
    ClaimRequest damaged = claimRequest(UUID.randomUUID().toString().replace("-", ""));
    assertThat(store.claim(damaged)).isInstanceOf(ClaimResult.Claimed.class);
    String owner = damaged.ownerToken();
    admin
        .sync()
        .set(
            store.redisKey(damaged.keyId()),
            "I" + owner.length() + ":" + owner + "-3:",
            SetArgs.Builder.keepttl());

    // a batch claim: the single claim's SET NX GET reply is parsed in Java, which refuses the
    // value at once; the batch script parses it in Lua (and so do the owner's lease renewals)
    CompletableFuture<java.util.List<ClaimResult>> damagedClaim =
        CompletableFuture.supplyAsync(
            () -> store.claimAll(java.util.List.of(claimRequest(damaged.keyId()))));
    awaitServerBusy();

    ClaimRequest healthy = claimRequest(UUID.randomUUID().toString().replace("-", ""));
    Throwable healthyFailure = null;
    ClaimResult healthyResult = null;
    try {
      healthyResult = store.claim(healthy);
    } catch (RuntimeException e) {
      healthyFailure = e;
    }

    // the damaged claim ends (an allocation failure under the ulimit, answered "unreadable")
    Throwable damagedOutcome = null;
    try {
      damagedClaim.get(120, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      damagedOutcome = e.getCause();
    }
    awaitServerAnswers();

    assertThat(healthyFailure)
        .as(
            "a claim of another key while the damaged key's claim runs (the damaged claim ended"
                + " with %s)",
            String.valueOf(damagedOutcome))
        .isNull();
    assertThat(healthyResult).isInstanceOf(ClaimResult.Claimed.class);
    assertThatThrownBy(() -> store.claim(claimRequest(damaged.keyId())))
        .isInstanceOf(UnreadableRecordException.class);
  }

  /**
   * The owner's lease renewal of its own damaged record (extend.lua: the head and owner token are
   * intact, so it parses the record in Lua), as the guard's lease keeper sends it while the send
   * runs: a claim of another key meanwhile must succeed.
   */
  @Test
  void aRenewalOfARecordWithANegativeFieldLengthDoesNotStopTheOtherKeys() throws Exception {
    ClaimRequest damaged = claimRequest(UUID.randomUUID().toString().replace("-", ""));
    assertThat(store.claim(damaged)).isInstanceOf(ClaimResult.Claimed.class);
    String owner = damaged.ownerToken();
    admin
        .sync()
        .set(
            store.redisKey(damaged.keyId()),
            "I" + owner.length() + ":" + owner + "-3:",
            SetArgs.Builder.keepttl());

    CompletableFuture<Boolean> renewal =
        CompletableFuture.supplyAsync(
            () ->
                store.extend(
                    new dev.idempotency.spi.ExtendRequest(
                        damaged.keyId(), owner, LEASE, Instant.now())));
    awaitServerBusy();

    Throwable healthyFailure = null;
    try {
      store.claim(claimRequest(UUID.randomUUID().toString().replace("-", "")));
    } catch (RuntimeException e) {
      healthyFailure = e;
    }
    Throwable renewalOutcome = null;
    try {
      renewalOutcome = new IllegalStateException("renewed: " + renewal.get(120, TimeUnit.SECONDS));
    } catch (java.util.concurrent.ExecutionException e) {
      renewalOutcome = e.getCause();
    }
    awaitServerAnswers();

    assertThat(healthyFailure)
        .as(
            "a claim of another key while the owner renews its damaged record (renewal: %s)",
            String.valueOf(renewalOutcome))
        .isNull();
  }

  /** Until a PING on another connection gets no answer within 200 ms: the script runs (10 s). */
  private void awaitServerBusy() throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (System.nanoTime() < deadline) {
      try {
        admin.async().ping().get(200, TimeUnit.MILLISECONDS);
      } catch (TimeoutException busy) {
        return;
      } catch (java.util.concurrent.ExecutionException busyReply) {
        return; // BUSY: already past lua-time-limit
      }
    }
    throw new AssertionError("the claim of the damaged key never kept the server busy");
  }

  /** Until the server answers a PING again (bounded, 120 s). */
  private void awaitServerAnswers() throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
    while (true) {
      try (StatefulRedisConnection<String, String> probe = client.connect()) {
        if ("PONG".equals(probe.sync().ping())) {
          return;
        }
      } catch (RuntimeException stillBusy) {
        if (System.nanoTime() > deadline) {
          throw stillBusy;
        }
        Thread.sleep(100);
      }
    }
  }

  private static ClaimRequest claimRequest(String keyId) {
    return new ClaimRequest(
        keyId, UUID.randomUUID().toString(), "", Instant.now(), LEASE, TTL, true, null);
  }
}
