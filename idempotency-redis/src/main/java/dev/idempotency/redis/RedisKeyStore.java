package dev.idempotency.redis;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import io.lettuce.core.RedisClient;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.codec.RedisCodec;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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
 * fingerprint, times and result as length-prefixed fields ({@link RecordValue}; about 180 bytes per
 * key in all for a 16-byte result, measured with {@code MEMORY USAGE}).
 *
 * <p><b>Round trips.</b> A claim is one plain {@code SET key record NX GET PX window}: it writes
 * the in-progress record if the key is absent, and otherwise returns the record there, so a replay
 * costs one command and no script. Only when that record is itself in progress does a second
 * command, the claim script, decide on the server's clock whether its lease has expired (and take
 * it over). Completing, releasing and renewing are one {@code EVALSHA} each, fenced by the owner
 * token: a first send costs two commands. Scripts are sent by SHA and re-sent in full on {@code
 * NOSCRIPT}, after a restart or a failover ({@link Scripts}). {@code SET} with both {@code NX} and
 * {@code GET} needs Redis 7.0 (or Valkey); on older servers, detected when the store is built,
 * every claim is the claim script, still one command.
 *
 * <p><b>Time.</b> Leases and windows always use the Redis server's clock, never the application's,
 * so application hosts with skewed clocks agree: the window is the key's expiry ({@code PX}), and
 * an in-progress record's age is read from its remaining TTL.
 *
 * <p><b>Bounded time.</b> Every operation fails with {@link KeyStoreException} once its {@link
 * Builder#operationTimeout(Duration) operation timeout} (2 seconds by default) has passed, whatever
 * the client's command timeout (60 seconds by default in Lettuce), and its commands not yet
 * answered are cancelled: while Redis is down a claim fails closed within that time, and a claim
 * Lettuce held back while disconnected is never written once Redis is back. A claim already written
 * to a Redis that stalled is run when it goes on: the guard takes such a claim back in the
 * background, fenced by its owner token ({@link #takeBack}). Lettuce reconnects by itself; the same
 * store works again without a restart. The store is built without connecting (a service whose Redis
 * is down at deploy time starts): it connects in the background, and an operation waits for that
 * first connection at most its {@link Builder#connectionWait(Duration) connection wait} (5 seconds
 * by default) before its own timeout starts.
 *
 * <p><b>Connections and threads.</b> The store opens one connection from the client you give it and
 * shares it between all threads, as Lettuce intends (it is thread-safe and pipelines). Its blocking
 * methods wait for their async twins ({@link StoreCommands} has one implementation for a standalone
 * or Sentinel connection and one for a cluster). Its async methods complete on Lettuce's event
 * loop; the guard moves off it before running anything of yours. {@link #close()} closes that
 * connection, not the client.
 *
 * <p><b>Where things live.</b> This class is the facade and its builder. The claim (and the replica
 * wait) is in {@code RedisClaims}; complete, release and extend in {@code RedisWrites}; the Lua
 * scripts and how they are sent in {@code Scripts}; reply parsing in {@code Replies}; the record
 * layout in {@code RecordValue}; the commands in {@code StoreCommands}, with {@code
 * StandaloneCommands} and {@code ClusterCommands}; the time bound of one operation in {@code
 * Operation}.
 */
public final class RedisKeyStore implements AsyncKeyStore, AutoCloseable {

  /** The default key prefix. */
  public static final String DEFAULT_KEY_PREFIX = "idem:";

  /** The default bound on the wait for the first connection: 5 seconds. */
  public static final Duration DEFAULT_CONNECTION_WAIT = Duration.ofSeconds(5);

  /** The default bound on one store operation: 2 seconds. */
  public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(2);

  private static final Pattern PREFIX = Pattern.compile("[A-Za-z0-9_:.\\-]{0,64}");
  private static final RedisCodec<String, byte[]> CODEC = StoreCodec.INSTANCE;
  private static final Pattern VERSION = Pattern.compile("(?m)^redis_version:(\\d+)\\.");

  private final ConnectingCommands commands;
  private final RedisContext redis;
  private final RedisClaims claims;
  private final RedisWrites writes;
  private final int maxPayloadBytes;
  private final Duration connectionWait;

  private RedisKeyStore(Builder builder) {
    this.maxPayloadBytes = builder.maxPayloadBytes;
    this.connectionWait = builder.connectionWait;
    Duration operationBound =
        builder.replicasToWaitFor > 0
            ? builder.operationTimeout.plus(builder.replicaTimeout)
            : builder.operationTimeout;
    RedisClient client = builder.client;
    RedisClusterClient clusterClient = builder.clusterClient;
    this.commands =
        new ConnectingCommands(
            () ->
                opened(
                    client != null
                        ? new StandaloneCommands(client.connect(CODEC))
                        : new ClusterCommands(clusterClient.connect(CODEC)),
                    operationBound),
            client != null);
    this.redis =
        new RedisContext(commands, new Scripts(commands), builder.keyPrefix, operationBound);
    this.writes = new RedisWrites(redis);
    this.claims =
        new RedisClaims(
            redis, writes, builder.setGetClaims, builder.replicasToWaitFor, builder.replicaTimeout);
    commands.connectInBackground();
  }

  /**
   * A connection just opened, with what the store needs to know of the server: whether it takes
   * {@code SET} with both {@code NX} and {@code GET} (Redis 7.0 and newer, and Valkey).
   */
  private static ConnectingCommands.Connected opened(StoreCommands opened, Duration bound) {
    try {
      Operation operation = Operation.awaited("read the server version", bound);
      String info = operation.await(operation.bounded(operation.send(opened::serverInfo)));
      Matcher version = VERSION.matcher(info);
      return new ConnectingCommands.Connected(
          opened, version.find() && Integer.parseInt(version.group(1)) >= 7);
    } catch (RuntimeException e) {
      opened.close();
      throw e;
    }
  }

  /**
   * Whether the store's connection is open (Lettuce may be reconnecting it). A store is built
   * without connecting; the first operation connects.
   *
   * @return {@code true} once a connection was opened
   */
  public boolean isConnected() {
    return commands.isConnected();
  }

  /**
   * Waits until the store's connection is open, trying to open it if need be: for an application
   * that wants to know at start-up (it need not: operations connect by themselves).
   *
   * @param timeout how long to wait, at most
   * @return {@code true} if connected; {@code false} if Redis could not be reached meanwhile
   */
  public boolean awaitConnection(Duration timeout) {
    Objects.requireNonNull(timeout, "timeout must not be null");
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!commands.isConnected()) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      try {
        commands.connection().get(left, java.util.concurrent.TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
        try {
          Thread.sleep(Math.min(100, Math.max(1, left / 1_000_000)));
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          return false;
        }
      }
    }
    return true;
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
    ensureConnected();
    Operation operation = redis.awaitedOperation("claim");
    return operation.await(claims.claim(operation, request));
  }

  @Override
  public CompletionStage<ClaimResult> claimAsync(ClaimRequest request) {
    Objects.requireNonNull(request, "request");
    return whenConnected(() -> claims.claim(redis.operation("claim"), request));
  }

  /**
   * Claims a batch: on standalone Redis in one script call for the whole batch (and one {@code
   * WAIT} if replicas are waited for); on a cluster, where keys live in different slots, as one
   * pipeline of single-key claims.
   */
  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    ensureConnected();
    return claims.claimAll(requests);
  }

  @Override
  public boolean complete(CompleteRequest request) {
    ensureConnected();
    Operation operation = redis.awaitedOperation("complete");
    return operation.await(writes.complete(operation, checked(request)));
  }

  @Override
  public CompletionStage<Boolean> completeAsync(CompleteRequest request) {
    CompleteRequest checked = checked(request);
    return whenConnected(() -> writes.complete(redis.operation("complete"), checked));
  }

  /** Completes a batch: one script call on standalone Redis, one pipeline on a cluster. */
  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    requests.forEach(this::checked);
    ensureConnected();
    return writes.completeAll(requests);
  }

  private CompleteRequest checked(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    request.requirePayloadAtMost(maxPayloadBytes);
    return request;
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    ensureConnected();
    Operation operation = redis.awaitedOperation("release");
    return operation.await(releaseChecked(operation, keyId, ownerToken));
  }

  @Override
  public CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken) {
    return whenConnected(() -> releaseChecked(redis.operation("release"), keyId, ownerToken));
  }

  /**
   * One script, fenced by the owner token: deletes a first attempt; a takeover keeps its attempt
   * and its lease ends now on Redis's clock ({@code now} is ignored).
   */
  @Override
  public boolean takeBack(String keyId, String ownerToken, Instant now) {
    ensureConnected();
    Operation operation = redis.awaitedOperation("take back");
    return operation.await(takeBackChecked(operation, keyId, ownerToken));
  }

  @Override
  public CompletionStage<Boolean> takeBackAsync(String keyId, String ownerToken, Instant now) {
    return whenConnected(() -> takeBackChecked(redis.operation("take back"), keyId, ownerToken));
  }

  private CompletableFuture<Boolean> takeBackChecked(
      Operation operation, String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    return writes.takeBack(operation, keyId, ownerToken);
  }

  /**
   * Waits, at most the connection wait, for the store's connection if it is not open yet: the
   * operation's own time bound starts once it is.
   */
  private void ensureConnected() {
    if (commands.isConnected()) {
      return;
    }
    try {
      commands.connection().get(connectionWait.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      throw notConnected(null);
    } catch (ExecutionException e) {
      throw notConnected(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KeyStoreException("Redis store: interrupted while connecting", e);
    }
  }

  /** {@link #ensureConnected()} without blocking. */
  private <T> CompletableFuture<T> whenConnected(Supplier<CompletableFuture<T>> operation) {
    if (commands.isConnected()) {
      return operation.get();
    }
    return commands
        .connection()
        .orTimeout(connectionWait.toNanos(), TimeUnit.NANOSECONDS)
        .handle(
            (connected, error) -> {
              if (error == null) {
                return operation.get();
              }
              Throwable cause = Operation.unwrap(error);
              return CompletableFuture.<T>failedFuture(
                  notConnected(cause instanceof TimeoutException ? null : cause));
            })
        .thenCompose(java.util.function.Function.identity());
  }

  private KeyStoreException notConnected(Throwable cause) {
    if (cause instanceof KeyStoreException e) {
      return e;
    }
    return new KeyStoreException(
        "Redis store could not connect within "
            + connectionWait.toMillis()
            + " ms (connectionWait)",
        cause);
  }

  private CompletableFuture<Boolean> releaseChecked(
      Operation operation, String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    return writes.release(operation, keyId, ownerToken);
  }

  @Override
  public boolean extend(ExtendRequest request) {
    Objects.requireNonNull(request, "request");
    ensureConnected();
    Operation operation = redis.awaitedOperation("extend");
    return operation.await(writes.extend(operation, request));
  }

  /** Reads a record with one script call; expired records are gone from Redis already. */
  @Override
  public java.util.Optional<dev.idempotency.spi.StoredRecord> find(
      String keyId, java.time.Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    ensureConnected();
    Operation operation = redis.awaitedOperation("find");
    return operation.await(writes.inspect(operation, keyId));
  }

  /** Deletes a settled record with one script call; never one in progress. */
  @Override
  public boolean delete(String keyId, java.time.Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    ensureConnected();
    Operation operation = redis.awaitedOperation("forget");
    return operation.await(writes.forget(operation, keyId));
  }

  /** Renews a batch of leases: one script call on standalone Redis, one pipeline on a cluster. */
  @Override
  public List<Boolean> extendAll(List<ExtendRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    ensureConnected();
    return writes.extendAll(requests);
  }

  @Override
  public int maxPayloadBytes() {
    return maxPayloadBytes;
  }

  /** {@code redis}. */
  @Override
  public String kind() {
    return "redis";
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
    return redis.redisKey(keyId);
  }

  /** Closes the connection this store opened; the client stays open. */
  @Override
  public void close() {
    commands.close();
  }

  /** Builds a {@link RedisKeyStore}. Setters validate at once. Not thread-safe. */
  public static final class Builder {
    private final RedisClient client;
    private final RedisClusterClient clusterClient;
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    private int replicasToWaitFor;
    private Duration replicaTimeout = Duration.ZERO;
    private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;
    private Duration connectionWait = DEFAULT_CONNECTION_WAIT;
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
     * The most one store operation may take, whatever the client's command timeout: past it the
     * operation fails with {@link KeyStoreException} (a claim sends nothing then) and its
     * unanswered commands are cancelled. Keep it above the slowest answer of a healthy server (a
     * batch script of 1,000 keys takes a few milliseconds). Default {@link
     * #DEFAULT_OPERATION_TIMEOUT}.
     *
     * @param timeout at least 1 ms
     * @return this builder
     */
    public Builder operationTimeout(Duration timeout) {
      Objects.requireNonNull(timeout, "operationTimeout must not be null");
      if (timeout.toMillis() < 1) {
        throw new IllegalArgumentException(
            "operationTimeout must be at least 1 ms, was " + timeout);
      }
      this.operationTimeout = timeout;
      return this;
    }

    /**
     * The most an operation waits for the store's connection while it is being opened (the store
     * connects in the background once built, and again after a failed attempt): past it the
     * operation fails with {@link KeyStoreException} and nothing is sent. Once connected, only
     * {@link #operationTimeout(Duration)} bounds an operation (Lettuce reconnects by itself).
     * Default {@link #DEFAULT_CONNECTION_WAIT}.
     *
     * @param wait at least 1 ms
     * @return this builder
     */
    public Builder connectionWait(Duration wait) {
      Objects.requireNonNull(wait, "connectionWait must not be null");
      if (wait.toMillis() < 1) {
        throw new IllegalArgumentException("connectionWait must be at least 1 ms, was " + wait);
      }
      this.connectionWait = wait;
      return this;
    }

    /**
     * After each successful claim, wait ({@code WAIT}) until this many replicas have acknowledged
     * it, on the connection that wrote it (on a cluster, the one to the key's master). If fewer do
     * within the timeout, the claim is released and fails with {@link KeyStoreException}, so
     * nothing is sent. This narrows, but does not close, the window in which a failover loses a
     * claim: Redis replication stays asynchronous, and a replica that acknowledged can still lose
     * the write if it is not the one promoted. Costs one more round trip per first send, and {@code
     * WAIT} holds up the connection it is sent on while it waits. Off by default.
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
     * Builds the store, without connecting: a service whose Redis is down when it starts still
     * starts. The first operation opens one connection from the client (kept open, and shared by
     * every operation, until {@link RedisKeyStore#close()}) and reads the server's version with
     * {@code INFO server} to choose the claim path; until Redis answers, each operation fails with
     * {@link KeyStoreException} (nothing is sent), and the store tries to connect again at most
     * once a second. The Lua scripts' sources are loaded from the jar; they reach the server on
     * first use.
     *
     * @return the store
     */
    public RedisKeyStore build() {
      return new RedisKeyStore(this);
    }
  }
}
