package dev.idempotency.redis;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.api.async.RedisStringAsyncCommands;
import io.lettuce.core.api.sync.BaseRedisCommands;
import io.lettuce.core.api.sync.RedisScriptingCommands;
import io.lettuce.core.api.sync.RedisServerCommands;
import io.lettuce.core.api.sync.RedisStringCommands;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KeyStore} in Redis, through Lettuce: standalone, Sentinel or Cluster.
 *
 * <pre>{@code
 * RedisKeyStore store = RedisKeyStore.builder(RedisClient.create("redis://localhost:6379"))
 *     .keyPrefix("idem:")
 *     .build();
 * }</pre>
 *
 * <p><b>Layout.</b> One Redis string per record at {@code prefix + keyDigest}, so every command
 * touches a single key and the store works unchanged on Redis Cluster. The string expires at the
 * end of the record's window, so Redis itself removes old records. It holds the state, attempt,
 * fingerprint, times and result as length-prefixed fields (about 180 bytes per key in all for a
 * 16-byte result, measured with {@code MEMORY USAGE}).
 *
 * <p><b>Round trips.</b> A claim is one plain {@code SET key record NX GET PX window}: it writes
 * the in-progress record if the key is absent, and otherwise returns the record there, so a replay
 * costs one command and no script. Only when that record is itself in progress does a second
 * command, the claim script, decide on the server's clock whether its lease has expired (and take
 * it over). Completing and releasing are one {@code EVALSHA} each, fenced by the owner token: a
 * first send costs two commands. Scripts are sent by SHA and re-sent in full on {@code NOSCRIPT},
 * after a restart or a failover. {@code SET} with both {@code NX} and {@code GET} needs Redis 7.0
 * (or Valkey); on older servers, detected when the store is built, every claim is the claim script,
 * still one command.
 *
 * <p><b>Time.</b> Leases and windows always use the Redis server's clock, never the application's,
 * so application hosts with skewed clocks agree: the window is the key's expiry ({@code PX}), and
 * an in-progress record's age is read from its remaining TTL.
 *
 * <p><b>Connections.</b> The store opens one connection from the client you give it and shares it
 * between all threads, as Lettuce intends (it is thread-safe and pipelines). {@link #close()}
 * closes that connection, not the client.
 *
 * <p><b>Errors.</b> Connection loss, timeouts and script errors become {@link KeyStoreException}.
 * Set the client's command timeout to what a caller may wait (the Lettuce default is 60 seconds);
 * with {@code ClientOptions.disconnectedBehavior(REJECT_COMMANDS)} a claim fails at once while
 * Redis is down instead of waiting for that timeout. Lettuce reconnects by itself.
 */
public final class RedisKeyStore implements AsyncKeyStore, AutoCloseable {

  /** The default key prefix. */
  public static final String DEFAULT_KEY_PREFIX = "idem:";

  private static final Logger log = LoggerFactory.getLogger(RedisKeyStore.class);
  private static final Pattern PREFIX = Pattern.compile("[A-Za-z0-9_:.\\-]{0,64}");
  private static final RedisCodec<String, byte[]> CODEC =
      RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE);
  private static final byte[] ONE = bytes("1");
  private static final byte[] ZERO = bytes("0");
  private static final Pattern VERSION = Pattern.compile("(?m)^redis_version:(\\d+)\\.");

  private final StatefulConnection<String, byte[]> connection;
  private final RedisScriptingCommands<String, byte[]> scripting;
  private final RedisScriptingAsyncCommands<String, byte[]> scriptingAsync;
  private final BaseRedisCommands<String, byte[]> base;
  private final RedisStringCommands<String, byte[]> strings;
  private final RedisStringAsyncCommands<String, byte[]> stringsAsync;
  private final boolean setGetClaims;
  private final boolean cluster;
  private final String keyPrefix;
  private final int maxPayloadBytes;
  private final int replicasToWaitFor;
  private final Duration replicaTimeout;
  private final Script claim;
  private final Script claimBatch;
  private final Script complete;
  private final Script completeBatch;
  private final Script release;

  private RedisKeyStore(Builder builder) {
    this.keyPrefix = builder.keyPrefix;
    this.maxPayloadBytes = builder.maxPayloadBytes;
    this.replicasToWaitFor = builder.replicasToWaitFor;
    this.replicaTimeout = builder.replicaTimeout;
    RedisServerCommands<String, byte[]> server;
    try {
      if (builder.client != null) {
        StatefulRedisConnection<String, byte[]> standalone = builder.client.connect(CODEC);
        this.connection = standalone;
        this.scripting = standalone.sync();
        this.scriptingAsync = standalone.async();
        this.base = standalone.sync();
        this.strings = standalone.sync();
        this.stringsAsync = standalone.async();
        server = standalone.sync();
        this.cluster = false;
      } else {
        StatefulRedisClusterConnection<String, byte[]> clustered =
            builder.clusterClient.connect(CODEC);
        this.connection = clustered;
        this.scripting = clustered.sync();
        this.scriptingAsync = clustered.async();
        this.base = clustered.sync();
        this.strings = clustered.sync();
        this.stringsAsync = clustered.async();
        server = clustered.sync();
        this.cluster = true;
      }
    } catch (RedisException e) {
      throw new KeyStoreException("Redis store could not connect: " + e.getMessage(), e);
    }
    try {
      this.setGetClaims = builder.setGetClaims && supportsSetNxGet(server);
    } catch (KeyStoreException e) {
      connection.close();
      throw e;
    }
    this.claim = Script.load(scripting, "record-functions.lua", "claim.lua");
    this.claimBatch = Script.load(scripting, "record-functions.lua", "claim-batch.lua");
    this.complete = Script.load(scripting, "complete-function.lua", "complete.lua");
    this.completeBatch = Script.load(scripting, "complete-function.lua", "complete-batch.lua");
    this.release = Script.load(scripting, "record-functions.lua", "release.lua");
  }

  /** {@code SET} with both {@code NX} and {@code GET}: Redis 7.0 and newer (and Valkey). */
  private static boolean supportsSetNxGet(RedisServerCommands<String, byte[]> server) {
    String info;
    try {
      info = server.info("server");
    } catch (RedisException e) {
      throw new KeyStoreException("Redis store could not connect: " + e.getMessage(), e);
    }
    Matcher version = VERSION.matcher(info);
    return version.find() && Integer.parseInt(version.group(1)) >= 7;
  }

  /**
   * Starts a builder on a standalone or Sentinel-managed Redis.
   *
   * @param client the client; its URI decides standalone or Sentinel
   * @return a new builder
   */
  public static Builder builder(RedisClient client) {
    return new Builder(Objects.requireNonNull(client, "client must not be null"), null);
  }

  /**
   * Starts a builder on a Redis Cluster.
   *
   * @param client the cluster client
   * @return a new builder
   */
  public static Builder builder(RedisClusterClient client) {
    return new Builder(null, Objects.requireNonNull(client, "client must not be null"));
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    Objects.requireNonNull(request, "request");
    byte[] record = newRecord(request);
    ClaimResult result = null;
    if (setGetClaims) {
      try {
        result =
            settledOrClaimed(strings.setGet(redisKey(request.keyId()), record, setArgs(request)));
      } catch (RedisException e) {
        throw asKeyStoreException(e, "claim");
      }
    }
    if (result == null) {
      result = claimResult(run(claim, "claim", request.keyId(), claimArgs(request, record)));
    }
    if (result instanceof ClaimResult.Claimed) {
      waitForReplicas(request);
    }
    return result;
  }

  @Override
  public CompletionStage<ClaimResult> claimAsync(ClaimRequest request) {
    Objects.requireNonNull(request, "request");
    if (replicasToWaitFor > 0) {
      return CompletableFuture.supplyAsync(() -> claim(request), Runnable::run);
    }
    byte[] record = newRecord(request);
    CompletableFuture<ClaimResult> fast;
    if (setGetClaims) {
      try {
        fast =
            stringsAsync
                .setGet(redisKey(request.keyId()), record, setArgs(request))
                .toCompletableFuture()
                .thenApply(RedisKeyStore::settledOrClaimed);
      } catch (RedisException e) {
        return CompletableFuture.failedFuture(asKeyStoreException(e, "claim"));
      }
    } else {
      fast = CompletableFuture.completedFuture(null);
    }
    return fast.thenCompose(
            result ->
                result != null
                    ? CompletableFuture.completedFuture(result)
                    : runAsync(claim, "claim", request.keyId(), claimArgs(request, record))
                        .thenApply(RedisKeyStore::claimResult))
        .exceptionallyCompose(
            error -> CompletableFuture.failedFuture(asKeyStoreException(error, "claim")));
  }

  /**
   * The fast claim, one plain command: {@code SET key record NX GET PX window} writes the record if
   * the key is absent and returns what was there otherwise.
   */
  private static SetArgs setArgs(ClaimRequest request) {
    return SetArgs.Builder.nx().px(request.retention().toMillis());
  }

  private static byte[] newRecord(ClaimRequest request) {
    return RecordValue.inProgress(
        request.ownerToken(),
        request.fingerprint(),
        request.lease().toMillis(),
        request.retention().toMillis(),
        request.debugKey());
  }

  /**
   * What {@code SET NX GET} returned: nothing, so the key is claimed; a completed or failed record,
   * so it exists; or a record in progress, for which this returns {@code null}: whether its lease
   * has expired is for the claim script to decide on the server's clock.
   */
  private static ClaimResult settledOrClaimed(byte[] previous) {
    if (previous == null) {
      return new ClaimResult.Claimed(1, false);
    }
    RecordValue record = RecordValue.parse(previous);
    return record.state() == RecordState.IN_PROGRESS
        ? null
        : new ClaimResult.Existing(record.settled(), false);
  }

  /**
   * Claims a batch: on standalone Redis in one script call for the whole batch; on a cluster, where
   * keys live in different slots, as one pipeline of single-key scripts.
   */
  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    if (cluster || replicasToWaitFor > 0) {
      List<CompletableFuture<ClaimResult>> pending = new ArrayList<>(requests.size());
      for (ClaimRequest request : requests) {
        pending.add(claimAsync(request).toCompletableFuture());
      }
      List<ClaimResult> results = new ArrayList<>(requests.size());
      for (CompletableFuture<ClaimResult> future : pending) {
        try {
          results.add(future.join());
        } catch (RuntimeException e) {
          results.add(new ClaimResult.Failed(asKeyStoreException(e, "claim")));
        }
      }
      return results;
    }
    String[] keys = new String[requests.size()];
    byte[][] args = new byte[requests.size() * 6][];
    for (int i = 0; i < requests.size(); i++) {
      ClaimRequest request = requests.get(i);
      keys[i] = redisKey(request.keyId());
      System.arraycopy(claimArgs(request, newRecord(request)), 0, args, i * 6, 6);
    }
    List<Object> replies = runKeys(claimBatch, "claim a batch", keys, args);
    List<ClaimResult> results = new ArrayList<>(replies.size());
    for (Object reply : replies) {
      @SuppressWarnings("unchecked")
      List<Object> one = (List<Object>) reply;
      results.add(claimResult(one));
    }
    return results;
  }

  private static byte[][] claimArgs(ClaimRequest request, byte[] record) {
    return new byte[][] {
      record,
      bytes(Long.toString(request.retention().toMillis())),
      bytes(Long.toString(request.lease().toMillis())),
      request.takeOverExpiredLease() ? ONE : ZERO,
      bytes(request.ownerToken()),
      bytes(request.fingerprint())
    };
  }

  /** The claim script's reply: see {@code claim} in {@code record-functions.lua}. */
  private static ClaimResult claimResult(List<Object> reply) {
    if (number(reply.get(0)) == 1) {
      int attempt = (int) number(reply.get(1));
      return new ClaimResult.Claimed(attempt, attempt > 1);
    }
    boolean leaseExpired = number(reply.get(1)) == 1;
    RecordValue record = RecordValue.parse((byte[]) reply.get(2));
    StoredRecord stored =
        reply.size() > 3
            ? record.inProgress(number(reply.get(3)), number(reply.get(4)))
            : record.settled();
    return new ClaimResult.Existing(stored, leaseExpired);
  }

  private void waitForReplicas(ClaimRequest request) {
    if (replicasToWaitFor == 0) {
      return;
    }
    long acknowledged;
    try {
      acknowledged = base.waitForReplication(replicasToWaitFor, replicaTimeout.toMillis());
    } catch (RedisException e) {
      acknowledged = -1;
    }
    if (acknowledged < replicasToWaitFor) {
      try {
        release(request.keyId(), request.ownerToken());
      } catch (KeyStoreException e) {
        log.debug("Could not release a claim that replicas did not acknowledge", e);
      }
      throw new KeyStoreException(
          "Redis store: the claim was acknowledged by "
              + Math.max(acknowledged, 0)
              + " of "
              + replicasToWaitFor
              + " replicas within "
              + replicaTimeout.toMillis()
              + " ms; released it, nothing was sent",
          null);
    }
  }

  @Override
  public boolean complete(CompleteRequest request) {
    return number(run(complete, "complete", checked(request).keyId(), completeArgs(request)).get(0))
        == 1;
  }

  @Override
  public CompletionStage<Boolean> completeAsync(CompleteRequest request) {
    return runAsync(complete, "complete", checked(request).keyId(), completeArgs(request))
        .thenApply(reply -> number(reply.get(0)) == 1);
  }

  /** Completes a batch: one script call on standalone Redis, one pipeline on a cluster. */
  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    if (cluster) {
      List<CompletableFuture<Boolean>> pending = new ArrayList<>(requests.size());
      for (CompleteRequest request : requests) {
        pending.add(completeAsync(request).toCompletableFuture());
      }
      List<Boolean> results = new ArrayList<>(requests.size());
      for (CompletableFuture<Boolean> future : pending) {
        try {
          results.add(future.join());
        } catch (RuntimeException e) {
          throw asKeyStoreException(e, "complete a batch");
        }
      }
      return results;
    }
    String[] keys = new String[requests.size()];
    byte[][] args = new byte[requests.size() * 3][];
    for (int i = 0; i < requests.size(); i++) {
      keys[i] = redisKey(checked(requests.get(i)).keyId());
      System.arraycopy(completeArgs(requests.get(i)), 0, args, i * 3, 3);
    }
    List<Boolean> results = new ArrayList<>(requests.size());
    for (Object reply : runKeys(completeBatch, "complete a batch", keys, args)) {
      results.add(number(reply) == 1);
    }
    return results;
  }

  private CompleteRequest checked(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    request.requirePayloadAtMost(maxPayloadBytes);
    return request;
  }

  private static byte[][] completeArgs(CompleteRequest request) {
    String state = request.state() == RecordState.COMPLETED ? "C" : "F";
    return new byte[][] {bytes(request.ownerToken()), bytes(state), request.payload()};
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    return number(run(release, "release", keyId, bytes(ownerToken)).get(0)) == 1;
  }

  @Override
  public CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    return runAsync(release, "release", keyId, bytes(ownerToken))
        .thenApply(reply -> number(reply.get(0)) == 1);
  }

  @Override
  public int maxPayloadBytes() {
    return maxPayloadBytes;
  }

  /** Always {@code true}: leases and windows use the Redis server's clock. */
  @Override
  public boolean usesServerTime() {
    return true;
  }

  /**
   * The Redis key under which a key id's record is stored.
   *
   * @param keyId a key id (the digest of a key)
   * @return {@code prefix + keyId}
   */
  public String redisKey(String keyId) {
    return keyPrefix + keyId;
  }

  /** Closes the connection this store opened; the client stays open. */
  @Override
  public void close() {
    connection.close();
  }

  private List<Object> run(Script script, String operation, String keyId, byte[]... args) {
    return runKeys(script, operation, new String[] {redisKey(keyId)}, args);
  }

  private List<Object> runKeys(Script script, String operation, String[] keys, byte[]... args) {
    try {
      try {
        return scripting.evalsha(script.sha, ScriptOutputType.MULTI, keys, args);
      } catch (RedisNoScriptException e) {
        log.debug("Redis did not know the {} script (restart or failover); sending it", operation);
        return scripting.eval(script.source, ScriptOutputType.MULTI, keys, args);
      }
    } catch (RedisException e) {
      throw asKeyStoreException(e, operation);
    }
  }

  /**
   * The async twin of {@link #run}: EVALSHA, then EVAL on NOSCRIPT, failures as KeyStoreException.
   */
  private CompletableFuture<List<Object>> runAsync(
      Script script, String operation, String keyId, byte[]... args) {
    String[] keys = {redisKey(keyId)};
    CompletableFuture<List<Object>> first;
    try {
      first =
          scriptingAsync
              .<List<Object>>evalsha(script.sha, ScriptOutputType.MULTI, keys, args)
              .toCompletableFuture();
    } catch (RedisException e) {
      return CompletableFuture.failedFuture(asKeyStoreException(e, operation));
    }
    return first
        .exceptionallyCompose(
            error -> {
              if (unwrap(error) instanceof RedisNoScriptException) {
                return scriptingAsync
                    .<List<Object>>eval(script.source, ScriptOutputType.MULTI, keys, args)
                    .toCompletableFuture();
              }
              return CompletableFuture.failedFuture(unwrap(error));
            })
        .exceptionallyCompose(
            error -> CompletableFuture.failedFuture(asKeyStoreException(error, operation)));
  }

  private static Throwable unwrap(Throwable error) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  private static KeyStoreException asKeyStoreException(Throwable error, String operation) {
    Throwable cause = unwrap(error);
    if (cause instanceof KeyStoreException e) {
      return e;
    }
    return new KeyStoreException(
        "Redis store failed to " + operation + ": " + cause.getClass().getSimpleName(), cause);
  }

  private static long number(Object value) {
    if (value instanceof Long number) {
      return number;
    }
    return Long.parseLong(text(value));
  }

  private static String text(Object value) {
    return value == null ? "" : new String((byte[]) value, StandardCharsets.UTF_8);
  }

  private static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /** A Lua script with its SHA-1, read from the jar. */
  private static final class Script {
    final String source;
    final String sha;

    private Script(String source, String sha) {
      this.source = source;
      this.sha = sha;
    }

    /** Concatenates resources (shared functions first) into one script. */
    static Script load(RedisScriptingCommands<String, byte[]> commands, String... names) {
      StringBuilder source = new StringBuilder();
      for (String name : names) {
        try (var in = RedisKeyStore.class.getResourceAsStream(name)) {
          if (in == null) {
            throw new IllegalStateException("missing script " + name);
          }
          source.append(new String(in.readAllBytes(), StandardCharsets.UTF_8)).append('\n');
        } catch (java.io.IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      }
      return new Script(source.toString(), commands.digest(source.toString()));
    }
  }

  /** Builds a {@link RedisKeyStore}. Setters validate at once. Not thread-safe. */
  public static final class Builder {
    private final RedisClient client;
    private final RedisClusterClient clusterClient;
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    private int replicasToWaitFor;
    private Duration replicaTimeout = Duration.ZERO;
    private boolean setGetClaims = true;

    private Builder(RedisClient client, RedisClusterClient clusterClient) {
      this.client = client;
      this.clusterClient = clusterClient;
    }

    /**
     * The prefix of every Redis key: up to 64 characters of {@code [A-Za-z0-9_:.-]}. Braces are
     * refused, since a hash tag would put every record on one cluster slot. Default {@link
     * #DEFAULT_KEY_PREFIX}.
     *
     * @param keyPrefix the prefix, may be empty
     * @return this builder
     * @throws IllegalArgumentException if it contains other characters
     */
    public Builder keyPrefix(String keyPrefix) {
      Objects.requireNonNull(keyPrefix, "keyPrefix must not be null");
      if (!PREFIX.matcher(keyPrefix).matches()) {
        throw new IllegalArgumentException(
            "keyPrefix must be at most 64 characters of [A-Za-z0-9_:.-], was '" + keyPrefix + "'");
      }
      this.keyPrefix = keyPrefix;
      return this;
    }

    /**
     * The largest stored result in bytes. Default {@link KeyStore#DEFAULT_MAX_PAYLOAD_BYTES}.
     *
     * @param maxPayloadBytes at least 1
     * @return this builder
     */
    public Builder maxPayloadBytes(int maxPayloadBytes) {
      if (maxPayloadBytes < 1) {
        throw new IllegalArgumentException(
            "maxPayloadBytes must be at least 1, was " + maxPayloadBytes);
      }
      this.maxPayloadBytes = maxPayloadBytes;
      return this;
    }

    /**
     * After each successful claim, wait ({@code WAIT}) until this many replicas have acknowledged
     * it. If fewer do within the timeout, the claim is released and fails with {@link
     * KeyStoreException}, so nothing is sent. This narrows, but does not close, the window in which
     * a failover loses a claim: Redis replication stays asynchronous, and a replica that
     * acknowledged can still lose the write if it is not the one promoted. Costs one more round
     * trip per first send, and {@code WAIT} holds up the shared connection while it waits. Off by
     * default.
     *
     * @param replicas how many replicas must acknowledge, at least 1
     * @param timeout how long to wait for them, positive
     * @return this builder
     */
    public Builder waitForReplicas(int replicas, Duration timeout) {
      Objects.requireNonNull(timeout, "timeout must not be null");
      if (replicas < 1) {
        throw new IllegalArgumentException("replicas must be at least 1, was " + replicas);
      }
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("timeout must be positive, was " + timeout);
      }
      this.replicasToWaitFor = replicas;
      this.replicaTimeout = timeout;
      return this;
    }

    /**
     * Claims with the claim script only, as on Redis before 7.0, even where {@code SET NX GET}
     * works: for the tests of that path.
     */
    Builder scriptClaimsOnly() {
      this.setGetClaims = false;
      return this;
    }

    /**
     * Connects and builds the store.
     *
     * @return the store
     * @throws KeyStoreException if Redis cannot be reached
     */
    public RedisKeyStore build() {
      return new RedisKeyStore(this);
    }
  }
}
