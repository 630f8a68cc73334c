package dev.idempotency.benchmarks;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.redis.RedisKeyStore;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Where the CPU of one operation goes, on Linux, against a running server (the peers harness's
 * PostgreSQL or Redis): the client process's time per operation, split into the worker threads and
 * the JVM's own threads by name (the JIT's compiler threads, Lettuce's event loop), and the
 * server's processes' time per operation, read from {@code /proc}. On a 2-core machine the client
 * and the server share the cores, so these sums bound the throughput the peers harness measures.
 *
 * <p>Workloads, each first sends of fresh keys or replays of sent ones, on {@code threads} threads
 * after {@code warmups} rounds of {@code keys} first sends and replays (the peers harness warms up
 * with one round of 10,000):
 *
 * <ul>
 *   <li>{@code redis guard}: the guard on {@link RedisKeyStore}; {@code redis floor}: {@code SET NX
 *       GET PX}, then {@code SET KEEPTTL}, on one Lettuce connection;
 *   <li>{@code postgresql guard}: the guard on {@link JdbcKeyStore} over HikariCP; {@code
 *       postgresql camel}: Camel's {@code JdbcMessageIdRepository} statements in plain JDBC (a
 *       transaction of {@code SELECT COUNT(*)}, then {@code INSERT} if absent, then commit).
 * </ul>
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.CpuPerOperation \
 *     redis 127.0.0.1:26379 guard first 16 10000 1
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.CpuPerOperation \
 *     postgresql 127.0.0.1:25432 camel replay 16 10000 1
 * </pre>
 *
 * The PostgreSQL user is {@code postgres} with no password, as in the harness; the Redis database
 * is emptied first, and PostgreSQL's {@code idempotency_records} and {@code camel_like} tables are
 * dropped and created again.
 */
public final class CpuPerOperation {

  private static final Duration TTL = Duration.ofHours(1);
  private static final long TICK_NANOS = 10_000_000L; // USER_HZ = 100 on Linux

  private CpuPerOperation() {}

  /**
   * Measures and prints one line per measured pass.
   *
   * @param args store ({@code redis}, {@code postgresql}), {@code host:port}, workload ({@code
   *     guard}, {@code floor} or {@code camel}), pass ({@code first}, {@code replay}), threads,
   *     keys, warm-up rounds
   * @throws Exception if the server cannot be reached
   */
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println(
          "usage: CpuPerOperation redis|postgresql HOST:PORT guard|floor|camel first|replay"
              + " THREADS KEYS WARMUP_ROUNDS");
      System.exit(2);
    }
    String store = args[0];
    String address = args[1];
    String workload = args[2];
    String passName = args[3];
    if (!(store.equals("redis") && (workload.equals("guard") || workload.equals("floor"))
        || store.equals("postgresql") && (workload.equals("guard") || workload.equals("camel")))) {
      throw new IllegalArgumentException(
          "workload must be guard or floor on redis, guard or camel on postgresql; got "
              + workload
              + " on "
              + store);
    }
    if (!passName.equals("first") && !passName.equals("replay")) {
      throw new IllegalArgumentException("pass must be first or replay; got " + passName);
    }
    boolean replays = passName.equals("replay");
    int threads = Integer.parseInt(args[4]);
    int keys = Integer.parseInt(args[5]);
    int warmups = Integer.parseInt(args[6]);
    try (Workload work = Workload.open(store, address, workload, threads)) {
      for (int round = 0; round < warmups; round++) {
        String[] warm = keys("w" + round + ":", keys);
        pass(threads, warm, work.first);
        pass(threads, warm, work.replay);
      }
      String[] measured = keys("m:", keys);
      if (replays) {
        pass(threads, measured, work.first);
      }
      String serverName = store.equals("redis") ? "redis-server" : "postgres";
      Map<String, Long> threadsBefore = threadTicks();
      long processBefore = ticks(Path.of("/proc/self/stat"));
      long serverBefore = serverTicks(serverName);
      long start = System.nanoTime();
      pass(threads, measured, replays ? work.replay : work.first);
      double seconds = (System.nanoTime() - start) / 1e9;
      long process = ticks(Path.of("/proc/self/stat")) - processBefore;
      long server = serverTicks(serverName) - serverBefore;
      Map<String, Long> jvmThreads = new TreeMap<>();
      long jvmTotal = 0;
      for (Map.Entry<String, Long> entry : threadTicks().entrySet()) {
        long delta = entry.getValue() - threadsBefore.getOrDefault(entry.getKey(), 0L);
        if (delta > 0) {
          String group = entry.getKey().substring(entry.getKey().indexOf(' ') + 1);
          jvmThreads.merge(group.replaceAll("[-#]?\\d+$", ""), delta, Long::sum);
          jvmTotal += delta;
        }
      }
      StringBuilder line = new StringBuilder();
      line.append(
          String.format(
              "%s %s %s T=%d: %.0f ops/s; CPU us/op: client %.1f (workers %.1f",
              store,
              workload,
              passName,
              threads,
              keys / seconds,
              perOp(process, keys),
              perOp(process - jvmTotal, keys)));
      jvmThreads.forEach(
          (name, t) -> line.append(", ").append(name).append(' ').append(perOp(t, keys)));
      line.append(String.format("), %s %.1f", serverName, perOp(server, keys)));
      System.out.println(line);
    }
  }

  private static double perOp(long ticks, int keys) {
    return ticks * (TICK_NANOS / 1000.0) / keys;
  }

  private static String[] keys(String prefix, int n) {
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      keys[i] = prefix + i;
    }
    return keys;
  }

  /** Runs {@code op} once per key on fresh threads, each taking the next key; waits for all. */
  private static void pass(int threads, String[] keys, Consumer<String> op)
      throws InterruptedException {
    AtomicInteger cursor = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      Thread worker =
          new Thread(
              () -> {
                try {
                  start.await();
                } catch (InterruptedException e) {
                  return;
                }
                for (int i; (i = cursor.getAndIncrement()) < keys.length; ) {
                  op.accept(keys[i]);
                }
              });
      worker.start();
      workers.add(worker);
    }
    start.countDown();
    for (Thread worker : workers) {
      worker.join();
    }
  }

  /** utime + stime of a {@code /proc/.../stat} file, in clock ticks. */
  private static long ticks(Path stat) {
    try {
      String text = Files.readString(stat);
      String[] fields = text.substring(text.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Every live thread of this process, "tid name" to its ticks. */
  private static Map<String, Long> threadTicks() throws IOException {
    Map<String, Long> ticks = new TreeMap<>();
    try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
      for (Path task : (Iterable<Path>) tasks::iterator) {
        try {
          String name = Files.readString(task.resolve("comm")).strip().replace(' ', '_');
          ticks.put(task.getFileName() + " " + name, ticks(task.resolve("stat")));
        } catch (IOException | UncheckedIOException gone) {
          // the thread ended meanwhile
        }
      }
    }
    return ticks;
  }

  /** The ticks of every process with this command name (the server and its workers). */
  private static long serverTicks(String command) {
    return ProcessHandle.allProcesses()
        .mapToLong(
            process -> {
              Path dir = Path.of("/proc", Long.toString(process.pid()));
              try {
                return Files.readString(dir.resolve("comm")).strip().equals(command)
                    ? ticks(dir.resolve("stat"))
                    : 0;
              } catch (IOException | UncheckedIOException gone) {
                return 0;
              }
            })
        .sum();
  }

  /** The two operations of a workload and what to close after it. */
  private static final class Workload implements AutoCloseable {
    final Consumer<String> first;
    final Consumer<String> replay;
    private final AutoCloseable closer;

    private Workload(Consumer<String> first, Consumer<String> replay, AutoCloseable closer) {
      this.first = first;
      this.replay = replay;
      this.closer = closer;
    }

    static Workload open(String store, String address, String workload, int threads)
        throws SQLException {
      if (store.equals("redis")) {
        RedisClient client = RedisClient.create(RedisURI.create("redis://" + address));
        StatefulRedisConnection<String, String> connection = client.connect();
        RedisCommands<String, String> redis = connection.sync();
        redis.flushdb();
        if (workload.equals("floor")) {
          Consumer<String> claim =
              key -> {
                if (redis.setGet("f:" + key, "I", SetArgs.Builder.nx().px(TTL.toMillis()))
                    == null) {
                  redis.set("f:" + key, "result-" + key, SetArgs.Builder.keepttl());
                }
              };
          return new Workload(claim, claim, client::shutdown);
        }
        RedisKeyStore keyStore = RedisKeyStore.builder(client).keyPrefix("g:").build();
        return guarded(
            keyStore,
            () -> {
              keyStore.close();
              client.shutdown();
            });
      }
      HikariConfig config = new HikariConfig();
      config.setJdbcUrl("jdbc:postgresql://" + address + "/postgres");
      config.setUsername("postgres");
      config.setMaximumPoolSize(Math.max(2, threads));
      config.setMinimumIdle(Math.max(2, threads));
      HikariDataSource pool = new HikariDataSource(config);
      try (Connection connection = pool.getConnection();
          Statement statement = connection.createStatement()) {
        statement.execute("DROP TABLE IF EXISTS idempotency_records");
        statement.execute("DROP TABLE IF EXISTS camel_like");
        statement.execute(
            "CREATE TABLE camel_like (processorName VARCHAR(255), messageId VARCHAR(100),"
                + " createdAt TIMESTAMP, PRIMARY KEY (processorName, messageId))");
      }
      if (workload.equals("camel")) {
        Consumer<String> add = key -> camelAdd(pool, key);
        return new Workload(add, add, pool);
      }
      JdbcKeyStore keyStore = JdbcKeyStore.builder(pool).createSchemaIfMissing(true).build();
      return guarded(keyStore, pool);
    }

    private static Workload guarded(dev.idempotency.spi.KeyStore keyStore, AutoCloseable closer) {
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(keyStore)
              .lease(Duration.ofSeconds(30))
              .inFlightWait(Duration.ofSeconds(10))
              .build();
      return new Workload(
          key -> guard.execute(key, TTL, ctx -> "result-" + key),
          key -> guard.execute(key, TTL, ctx -> "unused"),
          closer);
    }

    /** Camel's {@code add}: in one transaction, count the key, insert it if absent, commit. */
    private static void camelAdd(HikariDataSource pool, String key) {
      try (Connection connection = pool.getConnection()) {
        connection.setAutoCommit(false);
        try (PreparedStatement count =
            connection.prepareStatement(
                "SELECT COUNT(*) FROM camel_like WHERE processorName = ? AND messageId = ?")) {
          count.setString(1, "peers");
          count.setString(2, key);
          try (ResultSet rows = count.executeQuery()) {
            rows.next();
            if (rows.getInt(1) == 0) {
              try (PreparedStatement insert =
                  connection.prepareStatement(
                      "INSERT INTO camel_like (processorName, messageId, createdAt)"
                          + " VALUES (?, ?, CURRENT_TIMESTAMP)")) {
                insert.setString(1, "peers");
                insert.setString(2, key);
                insert.executeUpdate();
              }
            }
          }
        }
        connection.commit();
        connection.setAutoCommit(true);
      } catch (SQLException e) {
        throw new IllegalStateException("the Camel-shaped add failed", e);
      }
    }

    @Override
    public void close() throws Exception {
      closer.close();
    }
  }
}
