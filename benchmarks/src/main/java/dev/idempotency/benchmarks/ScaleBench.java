package dev.idempotency.benchmarks;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.jdbc.JdbcDialect;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.jdbc.JdbcPurger;
import dev.idempotency.redis.RedisKeyStore;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.IntFunction;

/**
 * How the cost grows with the work (issue #28), against running servers: the peers harness's
 * PostgreSQL ({@code fsync} on, as production runs it) and Redis. One command per step, each
 * printing text and appending JSON lines to {@code json=FILE} for {@code scale/charts.py}:
 *
 * <pre>
 * S="java -Xmx2g -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.ScaleBench"
 * $S pg-fill     pg=127.0.0.1:25432 table=idem_big live=10000000 expired=1000000
 * $S pg-size     pg=... table=idem_big
 * $S pg-latency  pg=... tables=idem_small,idem_big threads=1,16 keys=5000 rounds=3
 * $S pg-purge    pg=... table=idem_big threads=16 seconds=20 batch=1000
 * $S redis-fill  redis=127.0.0.1:26379 keys=10000000
 * $S redis-size  redis=...
 * $S redis-latency redis=127.0.0.1:26379,127.0.0.1:26380 threads=1,16 keys=5000 rounds=3
 * $S campaign    store=postgresql|redis pg=... redis=... n=1000000 mode=batch|chunked|floor
 * </pre>
 *
 * <p>Rows and keys are loaded in the layout the store writes: a template record is written by the
 * guard through the store, and copied with new key ids ({@code generate_series} on PostgreSQL,
 * pipelined {@code SET} on Redis). Key {@code "k" + i} (live) or {@code "x" + i} (expired) gets the
 * key id the guard gives it, so a loaded record replays through the guard like a sent one.
 * BENCHMARKS.md, run 11, says what each step measures and what it found.
 */
public final class ScaleBench {

  static final Duration TTL = Duration.ofHours(72);
  static final Duration LEASE = Duration.ofSeconds(30);
  static final String RESULT = "result-16-bytes!";
  private static final Base64.Encoder BASE64URL = Base64.getUrlEncoder().withoutPadding();

  private final Map<String, String> options;
  private final Path json;
  private final String run = Long.toString(System.currentTimeMillis(), 36);

  private ScaleBench(Map<String, String> options) {
    this.options = options;
    this.json = options.containsKey("json") ? Path.of(options.get("json")) : null;
  }

  /**
   * Runs one step.
   *
   * @param args the step, then {@code name=value} options
   * @throws Exception if a server cannot be reached or a step fails
   */
  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: ScaleBench STEP name=value... (see the class's Javadoc)");
      System.exit(2);
    }
    Map<String, String> options = new LinkedHashMap<>();
    for (int i = 1; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      if (eq < 1) {
        throw new IllegalArgumentException("options are name=value, got '" + args[i] + "'");
      }
      options.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    ScaleBench bench = new ScaleBench(options);
    switch (args[0]) {
      case "pg-fill" -> bench.pgFill();
      case "pg-size" -> bench.pgSize(bench.option("table", "idem_big"));
      case "pg-latency" -> bench.pgLatency();
      case "pg-purge" -> bench.pgPurge();
      case "redis-fill" -> bench.redisFill();
      case "redis-size" -> bench.redisSize();
      case "redis-latency" -> bench.redisLatency();
      case "campaign" -> bench.campaign();
      default -> throw new IllegalArgumentException("unknown step " + args[0]);
    }
    System.exit(0); // Lettuce and Hikari threads: the step is over
  }

  // ---------------------------------------------------------------- PostgreSQL

  private HikariDataSource pool(int size) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl("jdbc:postgresql://" + option("pg", "127.0.0.1:25432") + "/postgres");
    config.setUsername("postgres");
    config.setMaximumPoolSize(size);
    config.setMinimumIdle(size);
    return new HikariDataSource(config);
  }

  private static IdempotencyGuard guard(dev.idempotency.spi.KeyStore store) {
    return IdempotencyGuard.builder().store(store).lease(LEASE).inFlightWait(LEASE).build();
  }

  /** The key id the guard gives a key: base64url of SHA-256 of {@code "key\0" + key}. */
  static String keyId(String key) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      return BASE64URL.encodeToString(sha.digest(("key\0" + key).getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** SQL for the key id of {@code prefix || g}, as {@link #keyId} computes it. */
  private static String keyIdSql(String prefix) {
    return "translate(rtrim(encode(sha256('\\x6b657900'::bytea || convert_to('"
        + prefix
        + "' || g, 'UTF8')), 'base64'), '='), '+/', '-_')";
  }

  private void pgFill() throws Exception {
    String table = table(option("table", "idem_big"));
    long live = Long.parseLong(option("live", "10000000"));
    long expired = Long.parseLong(option("expired", "0"));
    boolean indexesAfter = !option("indexes", "after").equals("inline");
    try (HikariDataSource pool = pool(2);
        Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      boolean append = Boolean.parseBoolean(option("append", "false"));
      if (append) {
        indexesAfter = false; // rows added to a loaded table, as a running service adds them
      } else {
        statement.execute("DROP TABLE IF EXISTS " + table);
        statement.execute(JdbcKeyStore.schemaSql(JdbcDialect.POSTGRESQL, table));
      }
      JdbcKeyStore store = JdbcKeyStore.builder(pool).tableName(table).build();
      guard(store).execute("template", TTL, ctx -> RESULT);
      String template = keyId("template");
      if (indexesAfter) {
        statement.execute("ALTER TABLE " + table + " DROP CONSTRAINT " + table + "_pk");
        statement.execute("DROP INDEX " + table + "_retain_idx");
      }
      statement.execute("SET synchronous_commit = off"); // this loading session only
      long now = System.currentTimeMillis();
      long started = System.nanoTime();
      long chunk = 1_000_000;
      // created over the window as a steady stream would: live rows over the last 70 hours,
      // expired ones over an hour, each with its own retain_until
      String liveShift =
          "-(g * "
              + (TTL.toMillis() - Duration.ofHours(2).toMillis())
              + " / "
              + Math.max(1, live)
              + ")";
      String expiredShift =
          "-("
              + (TTL.toMillis() + Duration.ofHours(1).toMillis())
              + " + g * "
              + Duration.ofHours(1).toMillis()
              + " / "
              + Math.max(1, expired)
              + ")";
      for (long from = 0; from < live; from += chunk) {
        copyTemplate(
            statement, table, template, "k", from, Math.min(live, from + chunk) - 1, liveShift);
        System.out.printf(Locale.ROOT, "live rows %,d loaded%n", Math.min(live, from + chunk));
      }
      for (long from = 0; from < expired; from += chunk) {
        copyTemplate(
            statement,
            table,
            template,
            "x",
            from,
            Math.min(expired, from + chunk) - 1,
            expiredShift);
        System.out.printf(
            Locale.ROOT, "expired rows %,d loaded%n", Math.min(expired, from + chunk));
      }
      double loadSeconds = (System.nanoTime() - started) / 1e9;
      long indexStarted = System.nanoTime();
      if (indexesAfter) {
        statement.execute("SET maintenance_work_mem = '512MB'");
        statement.execute(
            "ALTER TABLE " + table + " ADD CONSTRAINT " + table + "_pk PRIMARY KEY (key_id)");
        statement.execute("CREATE INDEX " + table + "_retain_idx ON " + table + " (retain_until)");
      }
      double indexSeconds = (System.nanoTime() - indexStarted) / 1e9;
      // how many keys k0.. were loaded, for the latency step's replays of loaded keys
      statement.execute(
          "CREATE TABLE IF NOT EXISTS scale_loaded (table_name TEXT PRIMARY KEY, live BIGINT)");
      statement.execute(
          "INSERT INTO scale_loaded VALUES ('"
              + table
              + "', "
              + live
              + ") ON CONFLICT (table_name) DO UPDATE SET live = EXCLUDED.live");
      statement.execute("VACUUM ANALYZE " + table);
      statement.execute("CHECKPOINT");
      System.out.printf(
          Locale.ROOT,
          "%s: %,d live + %,d expired rows in %.1f s (%.0f rows/s), indexes %s in %.1f s%n",
          table,
          live,
          expired,
          loadSeconds,
          (live + expired) / loadSeconds,
          indexesAfter ? "built after" : "inline",
          indexSeconds);
      emit(
          "pg-fill",
          Map.of(
              "table", table,
              "live", live,
              "expired", expired,
              "load_s", loadSeconds,
              "index_s", indexSeconds,
              "indexes", indexesAfter ? "after" : "inline",
              "now_ms", now));
    }
    pgSize(table);
  }

  private static void copyTemplate(
      Statement statement,
      String table,
      String template,
      String prefix,
      long from,
      long to,
      String shiftMillis)
      throws SQLException {
    statement.execute(
        "INSERT INTO "
            + table
            + " (key_id, state, owner_token, attempt, fingerprint, payload, created_at,"
            + " completed_at, lease_until, retain_until, debug_key) SELECT "
            + keyIdSql(prefix)
            + ", t.state, translate(rtrim(encode(substr(sha256(convert_to('o' || g, 'UTF8')), 1,"
            + " 16), 'base64'), '='), '+/', '-_'), t.attempt, t.fingerprint, t.payload,"
            + " t.created_at + "
            + shiftMillis
            + ", t.completed_at + "
            + shiftMillis
            + ", t.lease_until + "
            + shiftMillis
            + ", t.retain_until + "
            + shiftMillis
            + ", t.debug_key FROM "
            + table
            + " t, generate_series("
            + from
            + "::bigint, "
            + to
            + "::bigint) g WHERE t.key_id = '"
            + template
            + "'");
  }

  private void pgSize(String tableName) throws Exception {
    String table = table(tableName);
    try (HikariDataSource pool = pool(1);
        Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute("VACUUM ANALYZE " + table);
      Map<String, Object> sizes = new LinkedHashMap<>();
      sizes.put("table", table);
      try (ResultSet rows =
          statement.executeQuery(
              "SELECT count(*), pg_relation_size('"
                  + table
                  + "'), pg_table_size('"
                  + table
                  + "'), pg_indexes_size('"
                  + table
                  + "'), pg_relation_size('"
                  + table
                  + "_pk'), pg_relation_size('"
                  + table
                  + "_retain_idx'), avg(pg_column_size(t.*)) FROM "
                  + table
                  + " t")) {
        rows.next();
        long count = rows.getLong(1);
        sizes.put("rows", count);
        sizes.put("heap_bytes", rows.getLong(2));
        sizes.put("table_bytes", rows.getLong(3));
        sizes.put("indexes_bytes", rows.getLong(4));
        sizes.put("pk_bytes", rows.getLong(5));
        sizes.put("retain_idx_bytes", rows.getLong(6));
        sizes.put("avg_row_bytes", rows.getDouble(7));
        sizes.put("table_per_row", (double) rows.getLong(3) / count);
        sizes.put("indexes_per_row", (double) rows.getLong(4) / count);
        sizes.put("pk_per_row", (double) rows.getLong(5) / count);
        sizes.put("retain_idx_per_row", (double) rows.getLong(6) / count);
        sizes.put("total_per_row", (double) (rows.getLong(3) + rows.getLong(4)) / count);
      }
      // a row the guard wrote against one the loader copied: the same layout, the same bytes
      try (ResultSet rows =
          statement.executeQuery(
              "SELECT pg_column_size(t.*) FROM "
                  + table
                  + " t WHERE key_id = '"
                  + keyId("template")
                  + "'")) {
        if (rows.next()) {
          sizes.put("guard_row_bytes", rows.getInt(1));
        }
      }
      System.out.println("sizes " + sizes);
      emit("pg-size", sizes);
    }
  }

  private void pgLatency() throws Exception {
    List<String> tables = List.of(option("tables", "idem_small,idem_big").split(","));
    int[] threads = ints(option("threads", "1,16"));
    int keys = Integer.parseInt(option("keys", "5000"));
    int rounds = Integer.parseInt(option("rounds", "3"));
    int maxThreads = Arrays.stream(threads).max().orElse(1);
    try (HikariDataSource pool = pool(maxThreads + 2)) {
      Map<String, IdempotencyGuard> guards = new LinkedHashMap<>();
      Map<String, Long> sizes = new HashMap<>();
      for (String table : tables) {
        guards.put(table, guard(JdbcKeyStore.builder(pool).tableName(table(table)).build()));
        sizes.put(table, liveRows(pool, table));
        loaded.put(table, loadedKeys(pool, table));
      }
      // warm-up: every table, every thread count, one pass each way
      for (String table : tables) {
        for (int t : threads) {
          latencyRound(guards.get(table), table, sizes.get(table), t, keys, -1, "pg-latency");
        }
      }
      for (int round = 0; round < rounds; round++) {
        for (int t : threads) {
          for (int i = 0; i < tables.size(); i++) {
            String table = tables.get((i + round) % tables.size());
            latencyRound(guards.get(table), table, sizes.get(table), t, keys, round, "pg-latency");
          }
        }
      }
    }
  }

  private final Map<String, Long> loaded = new HashMap<>();

  private long loadedKeys(javax.sql.DataSource pool, String table) throws SQLException {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement();
        ResultSet rows =
            statement.executeQuery(
                "SELECT live FROM scale_loaded WHERE table_name = '" + table(table) + "'")) {
      return rows.next() ? rows.getLong(1) : 0;
    }
  }

  private long liveRows(javax.sql.DataSource pool, String table) throws SQLException {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement();
        ResultSet rows =
            statement.executeQuery(
                "SELECT reltuples::bigint FROM pg_class WHERE relname = '" + table(table) + "'")) {
      return rows.next() ? rows.getLong(1) : 0;
    }
  }

  /**
   * First sends of fresh keys, replays of them, and replays of loaded keys picked at random from
   * the whole table ({@code replay-old}: pages the cache may not hold).
   */
  private void latencyRound(
      IdempotencyGuard guard,
      String target,
      long size,
      int threads,
      int keys,
      int round,
      String step)
      throws InterruptedException {
    String[] fresh = new String[keys];
    for (int i = 0; i < keys; i++) {
      fresh[i] = "lat-" + run + "-" + target + "-r" + round + "-t" + threads + "-" + i;
    }
    Pass first = Pass.run(threads, fresh, key -> guard.execute(key, TTL, ctx -> RESULT));
    Pass replay = Pass.run(threads, fresh, key -> guard.execute(key, TTL, ctx -> "sent again"));
    report(step, target, size, threads, round, "first", first);
    report(step, target, size, threads, round, "replay", replay);
    if (loaded.getOrDefault(target, size) > keys * 10L) {
      String[] old = new String[keys];
      ThreadLocalRandom random = ThreadLocalRandom.current();
      for (int i = 0; i < keys; i++) {
        old[i] = "k" + random.nextLong(loaded.getOrDefault(target, size));
      }
      Pass replayOld =
          Pass.run(
              threads,
              old,
              key -> {
                String result = guard.execute(key, TTL, ctx -> "sent again");
                if (!RESULT.equals(result)) {
                  throw new IllegalStateException("a loaded key did not replay: " + result);
                }
              });
      report(step, target, size, threads, round, "replay-old", replayOld);
    }
  }

  private void report(
      String step, String target, long size, int threads, int round, String pass, Pass result) {
    String load = load();
    System.out.printf(
        Locale.ROOT,
        "%s %-24s rows %,12d T=%-2d round %2d %-10s %8.0f ops/s  p50 %8.1f  p99 %9.1f us"
            + "  errors %d  load %s%n",
        step,
        target,
        size,
        threads,
        round,
        pass,
        result.opsPerSecond(),
        result.percentile(0.50),
        result.percentile(0.99),
        result.errors,
        load);
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("target", target);
    fields.put("size", size);
    fields.put("threads", threads);
    fields.put("round", round);
    fields.put("pass", pass);
    fields.put("ops_s", result.opsPerSecond());
    fields.put("p50_us", result.percentile(0.50));
    fields.put("p99_us", result.percentile(0.99));
    fields.put("errors", result.errors);
    fields.put("load1", load);
    emit(step, fields);
  }

  private void pgPurge() throws Exception {
    String table = table(option("table", "idem_big"));
    int threads = Integer.parseInt(option("threads", "16"));
    int seconds = Integer.parseInt(option("seconds", "20"));
    int batch = Integer.parseInt(option("batch", "" + JdbcPurger.DEFAULT_BATCH_SIZE));
    try (HikariDataSource pool = pool(threads + 2)) {
      JdbcKeyStore store = JdbcKeyStore.builder(pool).tableName(table).build();
      IdempotencyGuard guard = guard(store);
      long expired;
      try (Connection connection = pool.getConnection();
          Statement statement = connection.createStatement();
          ResultSet rows =
              statement.executeQuery(
                  "SELECT count(*) FROM "
                      + table
                      + " WHERE retain_until <= "
                      + System.currentTimeMillis())) {
        rows.next();
        expired = rows.getLong(1);
      }
      Phases phases = new Phases(threads, guard, run);
      phases.start();
      phases.measure("before", seconds);
      phases.phase.set("during");
      long started = System.nanoTime();
      long deleted = store.purger().purgeAllExpired(batch);
      double purgeSeconds = (System.nanoTime() - started) / 1e9;
      phases.phase.set("after");
      phases.measure("after", seconds);
      phases.stop();
      System.out.printf(
          Locale.ROOT,
          "purge: %,d of %,d expired rows deleted in %.1f s, %.0f rows/s, batch %d, while %d"
              + " threads sent; load %s%n",
          deleted,
          expired,
          purgeSeconds,
          deleted / purgeSeconds,
          batch,
          threads,
          load());
      for (String phase : List.of("before", "during", "after")) {
        for (String pass : List.of("first", "replay")) {
          Pass result = phases.result(phase, pass);
          System.out.printf(
              Locale.ROOT,
              "  %-6s %-6s %,9d ops  p50 %8.1f  p99 %9.1f us  errors %d%n",
              phase,
              pass,
              result.count(),
              result.percentile(0.50),
              result.percentile(0.99),
              result.errors);
          Map<String, Object> fields = new LinkedHashMap<>();
          fields.put("table", table);
          fields.put("threads", threads);
          fields.put("phase", phase);
          fields.put("pass", pass);
          fields.put("ops", result.count());
          fields.put("p50_us", result.percentile(0.50));
          fields.put("p99_us", result.percentile(0.99));
          fields.put("errors", result.errors);
          fields.put("deleted", deleted);
          fields.put("purge_s", purgeSeconds);
          fields.put("rows_s", deleted / purgeSeconds);
          fields.put("batch", batch);
          fields.put("load1", load());
          emit("pg-purge", fields);
        }
      }
    }
  }

  /** Workers sending and replaying without pause, their latencies kept per phase. */
  private static final class Phases {
    final java.util.concurrent.atomic.AtomicReference<String> phase =
        new java.util.concurrent.atomic.AtomicReference<>("warm-up");
    private final int threads;
    private final IdempotencyGuard guard;
    private final String run;
    private final Map<String, List<long[]>> samples =
        new java.util.concurrent.ConcurrentHashMap<>();
    private final AtomicLong errors = new AtomicLong();
    private volatile boolean stopping;
    private final List<Thread> workers = new ArrayList<>();

    Phases(int threads, IdempotencyGuard guard, String run) {
      this.threads = threads;
      this.guard = guard;
      this.run = run;
    }

    void start() {
      for (int t = 0; t < threads; t++) {
        int id = t;
        Thread worker =
            new Thread(
                () -> {
                  Map<String, long[]> mine = new HashMap<>();
                  Map<String, int[]> counts = new HashMap<>();
                  for (long n = 0; !stopping; n++) {
                    String key = "purge-" + run + "-" + id + "-" + n;
                    String now = phase.get();
                    time(now + "/first", mine, counts, () -> guard.execute(key, TTL, c -> RESULT));
                    time(now + "/replay", mine, counts, () -> guard.execute(key, TTL, c -> "x"));
                  }
                  mine.forEach(
                      (name, values) ->
                          samples
                              .computeIfAbsent(
                                  name,
                                  k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                              .add(Arrays.copyOf(values, counts.get(name)[0])));
                },
                "purge-load-" + t);
        workers.add(worker);
        worker.start();
      }
    }

    private void time(
        String name, Map<String, long[]> mine, Map<String, int[]> counts, Runnable call) {
      long start = System.nanoTime();
      try {
        call.run();
      } catch (RuntimeException e) {
        errors.incrementAndGet();
      }
      long nanos = System.nanoTime() - start;
      long[] values = mine.computeIfAbsent(name, k -> new long[1 << 16]);
      int[] count = counts.computeIfAbsent(name, k -> new int[1]);
      if (count[0] == values.length) {
        values = Arrays.copyOf(values, values.length * 2);
        mine.put(name, values);
      }
      values[count[0]++] = nanos;
    }

    void measure(String name, int seconds) throws InterruptedException {
      if (name.equals("before")) {
        Thread.sleep(TimeUnit.SECONDS.toMillis(Math.max(5, seconds / 2))); // warm-up
      }
      phase.set(name);
      Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
    }

    void stop() throws InterruptedException {
      stopping = true;
      for (Thread worker : workers) {
        worker.join();
      }
    }

    Pass result(String phase, String pass) {
      List<long[]> parts = samples.getOrDefault(phase + "/" + pass, List.of());
      long[] all = parts.stream().flatMapToLong(Arrays::stream).sorted().toArray();
      return new Pass(all, 0, errors.get());
    }
  }

  // ---------------------------------------------------------------- Redis

  private static RedisClient redisClient(String hostPort) {
    String[] parts = hostPort.split(":");
    return RedisClient.create(RedisURI.create(parts[0], Integer.parseInt(parts[1])));
  }

  private void redisFill() throws Exception {
    String server = option("redis", "127.0.0.1:26379");
    long keys = Long.parseLong(option("keys", "10000000"));
    String prefix = option("prefix", "idem:");
    RedisClient client = redisClient(server);
    try (RedisKeyStore store = RedisKeyStore.builder(client).keyPrefix(prefix).build();
        StatefulRedisConnection<String, byte[]> connection =
            client.connect(RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE))) {
      guard(store).execute("template", TTL, ctx -> RESULT);
      RedisCommands<String, byte[]> sync = connection.sync();
      byte[] record = sync.get(store.redisKey(keyId("template")));
      long before = usedMemory(sync);
      RedisAsyncCommands<String, byte[]> async = connection.async();
      connection.setAutoFlushCommands(false);
      SetArgs window = SetArgs.Builder.px(TTL.toMillis());
      long started = System.nanoTime();
      List<RedisFuture<String>> pending = new ArrayList<>(10_000);
      for (long i = 0; i < keys; i++) {
        pending.add(async.set(prefix + keyId("k" + i), record, window));
        if (pending.size() == 10_000) {
          connection.flushCommands();
          for (RedisFuture<String> reply : pending) {
            reply.get(60, TimeUnit.SECONDS);
          }
          pending.clear();
        }
        if ((i + 1) % 1_000_000 == 0) {
          System.out.printf(Locale.ROOT, "%,d keys loaded%n", i + 1);
        }
      }
      connection.flushCommands();
      for (RedisFuture<String> reply : pending) {
        reply.get(60, TimeUnit.SECONDS);
      }
      connection.setAutoFlushCommands(true);
      double seconds = (System.nanoTime() - started) / 1e9;
      sync.set("scale:loaded", Long.toString(keys).getBytes(StandardCharsets.UTF_8));
      long after = usedMemory(sync);
      System.out.printf(
          Locale.ROOT,
          "%,d keys in %.1f s (%.0f keys/s); used_memory %,d -> %,d bytes: %.1f per key%n",
          keys,
          seconds,
          keys / seconds,
          before,
          after,
          (after - before) / (double) keys);
      emit(
          "redis-fill",
          Map.of(
              "server", server,
              "keys", keys,
              "load_s", seconds,
              "used_memory_before", before,
              "used_memory_after", after,
              "used_memory_per_key", (after - before) / (double) keys,
              "record_bytes", record.length));
    } finally {
      client.shutdown();
    }
    redisSize();
  }

  private static long usedMemory(RedisCommands<String, byte[]> sync) {
    String info = sync.info("memory");
    for (String line : info.split("\r?\n")) {
      if (line.startsWith("used_memory:")) {
        return Long.parseLong(line.substring("used_memory:".length()).trim());
      }
    }
    throw new IllegalStateException("no used_memory in INFO memory");
  }

  private void redisSize() {
    String server = option("redis", "127.0.0.1:26379");
    String prefix = option("prefix", "idem:");
    long sampled = Long.parseLong(option("sample", "1000"));
    RedisClient client = redisClient(server);
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      RedisCommands<String, String> sync = connection.sync();
      long dbsize = sync.dbsize();
      long total = 0;
      long found = 0;
      for (long i = 0; i < sampled; i++) {
        Long usage = sync.memoryUsage(prefix + keyId("k" + i));
        if (usage != null) {
          total += usage;
          found++;
        }
      }
      String info = sync.info("memory");
      Map<String, Object> fields = new LinkedHashMap<>();
      fields.put("server", server);
      fields.put("dbsize", dbsize);
      fields.put("memory_usage_mean", found == 0 ? 0 : total / (double) found);
      fields.put("sampled", found);
      for (String line : info.split("\r?\n")) {
        for (String name :
            List.of(
                "used_memory",
                "used_memory_rss",
                "mem_fragmentation_ratio",
                "used_memory_overhead",
                "used_memory_dataset")) {
          if (line.startsWith(name + ":")) {
            fields.put(name, line.substring(name.length() + 1).trim());
          }
        }
      }
      System.out.println("redis " + fields);
      emit("redis-size", fields);
    } finally {
      client.shutdown();
    }
  }

  private void redisLatency() throws Exception {
    List<String> servers = List.of(option("redis", "127.0.0.1:26379").split(","));
    int[] threads = ints(option("threads", "1,16"));
    int keys = Integer.parseInt(option("keys", "5000"));
    int rounds = Integer.parseInt(option("rounds", "3"));
    String prefix = option("prefix", "idem:");
    List<RedisClient> clients = new ArrayList<>();
    Map<String, IdempotencyGuard> guards = new LinkedHashMap<>();
    Map<String, Long> sizes = new HashMap<>();
    try {
      for (String server : servers) {
        RedisClient client = redisClient(server);
        clients.add(client);
        guards.put(server, guard(RedisKeyStore.builder(client).keyPrefix(prefix).build()));
        try (StatefulRedisConnection<String, String> connection = client.connect()) {
          sizes.put(server, connection.sync().dbsize());
          String marker = connection.sync().get("scale:loaded");
          loaded.put(server, marker == null ? 0 : Long.parseLong(marker));
        }
      }
      for (String server : servers) {
        for (int t : threads) {
          latencyRound(guards.get(server), server, sizes.get(server), t, keys, -1, "redis-latency");
        }
      }
      for (int round = 0; round < rounds; round++) {
        for (int t : threads) {
          for (int i = 0; i < servers.size(); i++) {
            String server = servers.get((i + round) % servers.size());
            latencyRound(
                guards.get(server), server, sizes.get(server), t, keys, round, "redis-latency");
          }
        }
      }
    } finally {
      clients.forEach(RedisClient::shutdown);
    }
  }

  // ---------------------------------------------------------------- campaigns

  private void campaign() throws Exception {
    String storeName = option("store", "postgresql");
    int n = Integer.parseInt(option("n", "1000000"));
    String mode = option("mode", "batch");
    int chunk = Integer.parseInt(option("chunk", "10000"));
    HeapWatch heap = new HeapWatch();
    AutoCloseable resources;
    dev.idempotency.spi.KeyStore store;
    Runnable cleanup;
    RedisClient client = null;
    HikariDataSource pool = null;
    if (storeName.equals("postgresql")) {
      pool = pool(4);
      String table = table(option("table", "idem_campaign"));
      try (Connection connection = pool.getConnection();
          Statement statement = connection.createStatement()) {
        statement.execute("DROP TABLE IF EXISTS " + table);
        statement.execute(JdbcKeyStore.schemaSql(JdbcDialect.POSTGRESQL, table));
        statement.execute("CHECKPOINT");
      }
      store = JdbcKeyStore.builder(pool).tableName(table).build();
    } else {
      client = redisClient(option("redis", "127.0.0.1:26379"));
      store = RedisKeyStore.builder(client).keyPrefix(option("prefix", "camp:")).build();
    }
    String prefix = "c-" + run + "-";
    IntFunction<String> key = i -> prefix + i;
    long baseline = heap.liveBytes();
    heap.start();
    long started = System.nanoTime();
    double claimSeconds;
    long sent = 0;
    long retained = -1;
    switch (mode) {
      case "batch" -> {
        List<IdempotencyRequest> requests = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          requests.add(IdempotencyRequest.of(key.apply(i), TTL));
        }
        long requestsBytes = heap.liveBytes() - baseline;
        long claimStart = System.nanoTime();
        Batch<String> batch = guard(store).claimBatch(requests, ResultCodec.string());
        claimSeconds = (System.nanoTime() - claimStart) / 1e9;
        retained = heap.liveBytes() - baseline - requestsBytes;
        System.out.printf(
            Locale.ROOT,
            "requests list %,d bytes (%.0f per key); the batch after claiming %,d bytes (%.0f per"
                + " key)%n",
            requestsBytes,
            requestsBytes / (double) n,
            retained,
            retained / (double) n);
        for (Batch.Item item : batch.toSend()) {
          batch.succeeded(item, RESULT);
          sent++;
        }
        batch.record();
        started = claimStart;
      }
      case "chunked" -> {
        IdempotencyGuard guard = guard(store);
        double claiming = 0;
        for (int from = 0; from < n; from += chunk) {
          List<IdempotencyRequest> requests = new ArrayList<>(chunk);
          for (int i = from; i < Math.min(n, from + chunk); i++) {
            requests.add(IdempotencyRequest.of(key.apply(i), TTL));
          }
          long claimStart = System.nanoTime();
          Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
          claiming += (System.nanoTime() - claimStart) / 1e9;
          for (Batch.Item item : batch.toSend()) {
            batch.succeeded(item, RESULT);
            sent++;
          }
          batch.record();
        }
        claimSeconds = claiming;
      }
      case "floor" -> {
        claimSeconds =
            storeName.equals("postgresql")
                ? floorPostgres(pool, table(option("table", "idem_campaign")), n, key)
                : floorRedis(client, option("prefix", "camp:"), n, key);
        sent = n;
      }
      default -> throw new IllegalArgumentException("mode must be batch, chunked or floor");
    }
    double totalSeconds = (System.nanoTime() - started) / 1e9;
    heap.stop();
    System.out.printf(
        Locale.ROOT,
        "campaign %s %s: %,d keys, claimed in %.1f s (%.0f keys/s), all done in %.1f s (%.0f"
            + " keys/s), %,d sent; heap: max used %,d MB (sampled), baseline %,d MB; load %s%n",
        storeName,
        mode,
        n,
        claimSeconds,
        n / claimSeconds,
        totalSeconds,
        n / totalSeconds,
        sent,
        heap.maxUsed >> 20,
        baseline >> 20,
        load());
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("store", storeName);
    fields.put("mode", mode);
    fields.put("n", n);
    fields.put("chunk", chunk);
    fields.put("claim_s", claimSeconds);
    fields.put("claim_keys_s", n / claimSeconds);
    fields.put("total_s", totalSeconds);
    fields.put("total_keys_s", n / totalSeconds);
    fields.put("sent", sent);
    fields.put("heap_max_used", heap.maxUsed);
    fields.put("heap_baseline", baseline);
    fields.put("batch_retained_bytes", retained);
    fields.put("xmx", Runtime.getRuntime().maxMemory());
    fields.put("load1", load());
    emit("campaign", fields);
    if (client != null) {
      ((RedisKeyStore) store).close();
      client.shutdown();
    }
    if (pool != null) {
      pool.close();
    }
  }

  /** Multi-row insert-if-absent of the store's columns, in chunks of the store's batch size. */
  private static double floorPostgres(
      HikariDataSource pool, String table, int n, IntFunction<String> key) throws SQLException {
    int chunk = 500;
    StringBuilder sql =
        new StringBuilder(
            "INSERT INTO "
                + table
                + " (key_id, state, owner_token, attempt, fingerprint, payload, created_at,"
                + " completed_at, lease_until, retain_until, debug_key) VALUES ");
    for (int i = 0; i < chunk; i++) {
      sql.append(i == 0 ? "" : ", ")
          .append("(?, 'IN_PROGRESS', ?, 1, '', NULL, ?, NULL, ?, ?, NULL)");
    }
    sql.append(" ON CONFLICT DO NOTHING");
    long started = System.nanoTime();
    try (Connection connection = pool.getConnection();
        PreparedStatement insert = connection.prepareStatement(sql.toString())) {
      for (int from = 0; from < n; from += chunk) {
        long now = System.currentTimeMillis();
        for (int i = 0; i < chunk; i++) {
          int index = Math.min(n - 1, from + i); // a short last chunk repeats its last key
          int p = i * 5;
          insert.setString(p + 1, keyId(key.apply(index)));
          insert.setString(p + 2, "token-" + index);
          insert.setLong(p + 3, now);
          insert.setLong(p + 4, now + LEASE.toMillis());
          insert.setLong(p + 5, now + TTL.toMillis());
        }
        insert.executeUpdate();
      }
    }
    return (System.nanoTime() - started) / 1e9;
  }

  /** Pipelined {@code SET key record NX PX window}, flushed every 1,000 keys. */
  private static double floorRedis(
      RedisClient client, String prefix, int n, IntFunction<String> key) throws Exception {
    byte[] record = new byte[110]; // about an in-progress record's size
    Arrays.fill(record, (byte) 'x');
    try (StatefulRedisConnection<String, byte[]> connection =
        client.connect(RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE))) {
      RedisAsyncCommands<String, byte[]> async = connection.async();
      connection.setAutoFlushCommands(false);
      SetArgs args = SetArgs.Builder.nx().px(TTL.toMillis());
      long started = System.nanoTime();
      List<RedisFuture<String>> pending = new ArrayList<>(1000);
      for (int i = 0; i < n; i++) {
        pending.add(async.set(prefix + keyId(key.apply(i)), record, args));
        if (pending.size() == 1000 || i == n - 1) {
          connection.flushCommands();
          for (RedisFuture<String> reply : pending) {
            reply.get(60, TimeUnit.SECONDS);
          }
          pending.clear();
        }
      }
      return (System.nanoTime() - started) / 1e9;
    }
  }

  /** The heap's used bytes, sampled every 20 ms while a campaign runs, and its live size. */
  private static final class HeapWatch {
    private final MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    private volatile boolean running;
    volatile long maxUsed;
    private Thread sampler;

    long liveBytes() {
      System.gc();
      System.gc();
      return memory.getHeapMemoryUsage().getUsed();
    }

    void start() {
      running = true;
      sampler =
          new Thread(
              () -> {
                while (running) {
                  maxUsed = Math.max(maxUsed, memory.getHeapMemoryUsage().getUsed());
                  try {
                    Thread.sleep(20);
                  } catch (InterruptedException e) {
                    return;
                  }
                }
              },
              "heap-watch");
      sampler.setDaemon(true);
      sampler.start();
    }

    void stop() throws InterruptedException {
      running = false;
      sampler.join();
    }
  }

  // ---------------------------------------------------------------- shared

  /** The latencies of one pass over keys on T threads. */
  static final class Pass {
    private final long[] sorted;
    private final double seconds;
    final long errors;

    Pass(long[] sorted, double seconds, long errors) {
      this.sorted = sorted;
      this.seconds = seconds;
      this.errors = errors;
    }

    static Pass run(int threads, String[] keys, Consumer<String> call) throws InterruptedException {
      AtomicInteger cursor = new AtomicInteger();
      long[][] nanos = new long[threads][keys.length];
      int[] counts = new int[threads];
      AtomicLong errors = new AtomicLong();
      CountDownLatch start = new CountDownLatch(1);
      List<Thread> workers = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int id = t;
        Thread worker =
            new Thread(
                () -> {
                  try {
                    start.await();
                  } catch (InterruptedException e) {
                    return;
                  }
                  int i;
                  while ((i = cursor.getAndIncrement()) < keys.length) {
                    long begin = System.nanoTime();
                    try {
                      call.accept(keys[i]);
                    } catch (RuntimeException e) {
                      errors.incrementAndGet();
                    }
                    nanos[id][counts[id]++] = System.nanoTime() - begin;
                  }
                },
                "pass-" + t);
        workers.add(worker);
        worker.start();
      }
      long begin = System.nanoTime();
      start.countDown();
      for (Thread worker : workers) {
        worker.join();
      }
      double seconds = (System.nanoTime() - begin) / 1e9;
      long[] all = new long[keys.length];
      int at = 0;
      for (int t = 0; t < threads; t++) {
        System.arraycopy(nanos[t], 0, all, at, counts[t]);
        at += counts[t];
      }
      Arrays.sort(all);
      return new Pass(all, seconds, errors.get());
    }

    int count() {
      return sorted.length;
    }

    double opsPerSecond() {
      return sorted.length / seconds;
    }

    double percentile(double p) {
      return sorted.length == 0
          ? Double.NaN
          : sorted[Math.min(sorted.length - 1, (int) (sorted.length * p))] / 1e3;
    }
  }

  private String option(String name, String fallback) {
    return options.getOrDefault(name, fallback);
  }

  private static int[] ints(String list) {
    return Arrays.stream(list.split(",")).mapToInt(Integer::parseInt).toArray();
  }

  /** A plain table name: the benchmark's own, never from a user. */
  private static String table(String name) {
    if (!name.matches("[a-z_][a-z0-9_]{0,40}")) {
      throw new IllegalArgumentException("table must be a plain lower-case name, got " + name);
    }
    return name;
  }

  static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
    } catch (IOException e) {
      return "?";
    }
  }

  private void emit(String step, Map<String, ?> fields) {
    if (json == null) {
      return;
    }
    StringBuilder line = new StringBuilder("{\"tool\":\"ScaleBench\",\"step\":\"").append(step);
    line.append("\",\"run\":\"").append(run).append('"');
    for (Map.Entry<String, ?> field : fields.entrySet()) {
      line.append(",\"").append(field.getKey()).append("\":");
      Object value = field.getValue();
      if (value instanceof Number number && !(value instanceof Double d && d.isNaN())) {
        line.append(
            number instanceof Double || number instanceof Float
                ? String.format(Locale.ROOT, "%.3f", number.doubleValue())
                : number.toString());
      } else if (value instanceof String text && text.matches("-?[0-9]+(\\.[0-9]+)?")) {
        line.append(text);
      } else {
        line.append('"').append(Objects.toString(value).replace("\"", "'")).append('"');
      }
    }
    line.append("}\n");
    try {
      Files.writeString(
          json, line, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
