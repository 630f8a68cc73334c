package dev.idempotency.redis;

import dev.idempotency.KeyStoreException;
import io.lettuce.core.SetArgs;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The store's commands on a connection opened on first use, not when the store is built: a service
 * whose Redis is down at deploy time starts, each call fails closed with {@link KeyStoreException}
 * while Redis cannot be reached, and the store works as soon as it can, without a restart. Once
 * open, the connection reconnects by itself (Lettuce's own reconnection).
 *
 * <ol>
 *   <li>The first command starts a connection attempt on a background thread (opening the
 *       connection and reading the server's version), and waits for it within its operation's time
 *       bound; commands meanwhile wait for the same attempt.
 *   <li>After a failed attempt, commands fail at once with its error for a second; the next one
 *       after that starts a new attempt.
 *   <li>Once connected, every command goes straight to the connection.
 * </ol>
 */
final class ConnectingCommands implements StoreCommands {

  private static final Logger log = LoggerFactory.getLogger(RedisKeyStore.class);
  private static final long RETRY_AFTER_NANOS = TimeUnit.SECONDS.toNanos(1);

  /** What a successful attempt gives: the commands, and whether the server has SET NX GET. */
  record Connected(StoreCommands commands, boolean setNxGet) {}

  private final Supplier<Connected> connect;
  private final boolean multiKeyScripts;
  private final ExecutorService connector;
  private volatile Connected connected;
  private CompletableFuture<Connected> attempt;
  private long failedAt;
  private volatile boolean closed;

  /**
   * @param connect opens the connection and reads what the store needs to know of the server; may
   *     block, and throws if Redis cannot be reached
   * @param multiKeyScripts whether one script call may touch many keys (standalone)
   */
  ConnectingCommands(Supplier<Connected> connect, boolean multiKeyScripts) {
    this.connect = connect;
    this.multiKeyScripts = multiKeyScripts;
    ThreadPoolExecutor executor =
        new ThreadPoolExecutor(
            0,
            1,
            10,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            task -> {
              Thread thread = new Thread(task, "idempotency-redis-connect");
              thread.setDaemon(true);
              return thread;
            });
    this.connector = executor;
  }

  /** The connection, once open: the attempt under way, or a new one; a recent failure at once. */
  CompletableFuture<Connected> connection() {
    Connected open = connected;
    if (open != null) {
      return CompletableFuture.completedFuture(open);
    }
    synchronized (this) {
      if (connected != null) {
        return CompletableFuture.completedFuture(connected);
      }
      if (closed) {
        return CompletableFuture.failedFuture(new KeyStoreException("Redis store is closed", null));
      }
      boolean recentFailure =
          attempt != null
              && attempt.isCompletedExceptionally()
              && System.nanoTime() - failedAt < RETRY_AFTER_NANOS;
      if (attempt == null || (attempt.isCompletedExceptionally() && !recentFailure)) {
        attempt = CompletableFuture.supplyAsync(this::open, connector);
      }
      return attempt;
    }
  }

  private Connected open() {
    try {
      Connected opened = connect.get();
      synchronized (this) {
        if (closed) {
          opened.commands().close();
          throw new KeyStoreException("Redis store is closed", null);
        }
        connected = opened;
      }
      log.info("Redis store connected");
      return opened;
    } catch (RuntimeException e) {
      synchronized (this) {
        failedAt = System.nanoTime();
      }
      log.debug("Redis store could not connect; it tries again on a later call", e);
      throw e instanceof KeyStoreException k
          ? k
          : new KeyStoreException("Redis store could not connect: " + describe(e), e);
    }
  }

  private static String describe(Throwable e) {
    Throwable cause = e;
    while (cause.getCause() != null && cause.getCause() != cause) {
      cause = cause.getCause();
    }
    return cause.getClass().getSimpleName()
        + (cause.getMessage() == null ? "" : ": " + cause.getMessage());
  }

  /** Whether the server takes {@code SET NX GET}, or {@code null} before the first connection. */
  Boolean setNxGetIfConnected() {
    Connected open = connected;
    return open == null ? null : open.setNxGet();
  }

  /** Whether the server takes {@code SET NX GET} (Redis 7 or Valkey); once connected. */
  CompletableFuture<Boolean> setNxGet() {
    Connected open = connected;
    return open != null
        ? CompletableFuture.completedFuture(open.setNxGet())
        : connection().thenApply(Connected::setNxGet);
  }

  private <T> CompletableFuture<T> send(Function<StoreCommands, CompletableFuture<T>> command) {
    Connected open = connected;
    if (open != null) {
      return command.apply(open.commands());
    }
    return connection().thenCompose(now -> command.apply(now.commands()));
  }

  @Override
  public CompletableFuture<byte[]> setGet(String key, byte[] value, SetArgs args) {
    return send(commands -> commands.setGet(key, value, args));
  }

  @Override
  public CompletableFuture<List<Object>> evalsha(String sha, String[] keys, byte[]... args) {
    return send(commands -> commands.evalsha(sha, keys, args));
  }

  @Override
  public CompletableFuture<List<Object>> eval(String script, String[] keys, byte[]... args) {
    return send(commands -> commands.eval(script, keys, args));
  }

  @Override
  public CompletableFuture<Long> waitForReplication(String key, int replicas, long timeoutMillis) {
    return send(commands -> commands.waitForReplication(key, replicas, timeoutMillis));
  }

  @Override
  public CompletableFuture<String> serverInfo() {
    return send(StoreCommands::serverInfo);
  }

  @Override
  public String digest(String script) {
    return Scripts.sha1(script);
  }

  @Override
  public boolean multiKeyScripts() {
    return multiKeyScripts;
  }

  /** Starts connecting now, in the background, if no attempt is under way. */
  void connectInBackground() {
    connection();
  }

  /** Whether the connection is open (it may be reconnecting). */
  boolean isConnected() {
    return connected != null;
  }

  @Override
  public void close() {
    Connected open;
    synchronized (this) {
      closed = true;
      open = connected;
      connected = null;
    }
    if (open != null) {
      open.commands().close();
    }
    connector.shutdown();
  }
}
