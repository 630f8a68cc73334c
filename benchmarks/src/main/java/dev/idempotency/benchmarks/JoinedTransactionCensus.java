package dev.idempotency.benchmarks;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.jdbc.JdbcKeyStore;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * Counts what {@link JoinedTransactionBenchmark}'s calls cost PostgreSQL: statements per call, by
 * statement ({@code pg_stat_statements}, which also lists {@code BEGIN} and {@code COMMIT}), and
 * transactions committed and rolled back per call ({@code pg_stat_database} deltas).
 *
 * <p>Each operation runs {@code small} and then {@code large} times on a pool of its own, opened
 * after the previous pool's backends have gone; the figures per call are the difference of the two
 * runs divided by the difference of their sizes, so what opening the pool and building the store
 * cost cancels out. A backend reports its transactions when it exits, so each run closes its pool,
 * waits for its backends to leave {@code pg_stat_activity} and for {@code xact_commit} to stop
 * moving (bounded polling). The counts are read in one transaction that is never committed, with
 * {@code stats_fetch_consistency = none}, so reading them adds none. Autovacuum is off.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.idempotency.benchmarks.JoinedTransactionCensus [small large]
 * </pre>
 */
public final class JoinedTransactionCensus {

  private static final String APPLICATION = "census";
  private static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(60);

  private interface Operation {
    void run(JoinedTransactionBenchmark.Database database, String key) throws Exception;
  }

  private record Counts(long commits, long rollbacks, Map<String, Long> statements) {}

  private JoinedTransactionCensus() {}

  /**
   * Prints statements and transactions per call of each operation.
   *
   * @param args optional: the two run sizes (default 100 and 600)
   * @throws Exception if the database fails
   */
  public static void main(String[] args) throws Exception {
    int small = args.length > 0 ? Integer.parseInt(args[0]) : 100;
    int large = args.length > 1 ? Integer.parseInt(args[1]) : 600;
    Map<String, Operation> operations = new LinkedHashMap<>();
    operations.put("usualFirstSend", JoinedTransactionBenchmark::usual);
    operations.put("joinedFirstSend", JoinedTransactionBenchmark::joined);
    operations.put("usualReplay", JoinedTransactionBenchmark::usual);
    operations.put("joinedReplay", JoinedTransactionBenchmark::joined);
    operations.put(
        "floorOutboxInsert",
        (database, key) -> {
          try (Connection connection = database.dataSource.getConnection()) {
            connection.setAutoCommit(false);
            JoinedTransactionBenchmark.insertOutboxRow(connection);
            connection.commit();
          }
        });
    try (EmbeddedPostgres postgres =
        EmbeddedPostgres.builder()
            .setPGStartupWait(Duration.ofSeconds(120))
            .setServerConfig("shared_preload_libraries", "pg_stat_statements")
            .setServerConfig("pg_stat_statements.track", "all")
            .setServerConfig("autovacuum", "off")
            .start()) {
      String url = postgres.getJdbcUrl("postgres", "postgres");
      try (Connection monitor = DriverManager.getConnection(url + "&ApplicationName=monitor")) {
        try (Statement statement = monitor.createStatement()) {
          statement.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
          statement.execute(JoinedTransactionBenchmark.OUTBOX_DDL);
        }
        monitor.setAutoCommit(false);
        try (Statement statement = monitor.createStatement()) {
          statement.execute("SET stats_fetch_consistency = none");
        }
        System.out.printf(
            "PostgreSQL %s; per call, the difference of %d and %d calls%n",
            monitor.getMetaData().getDatabaseProductVersion(), large, small);
        for (Map.Entry<String, Operation> operation : operations.entrySet()) {
          Counts few = census(url, monitor, operation.getKey(), operation.getValue(), small);
          Counts many = census(url, monitor, operation.getKey(), operation.getValue(), large);
          print(operation.getKey(), few, many, large - small);
        }
        monitor.rollback();
      }
    }
  }

  /** Runs one operation {@code calls} times on a pool of its own and returns what it cost. */
  private static Counts census(
      String url, Connection monitor, String name, Operation operation, int calls)
      throws Exception {
    String run = UUID.randomUUID().toString().substring(0, 8);
    String[] keys = new String[calls];
    for (int i = 0; i < calls; i++) {
      keys[i] = name + ":" + run + ":" + i;
    }
    if (name.endsWith("Replay")) {
      withPool(url, database -> sendAll(database, operation, keys));
    }
    settle(monitor);
    long[] before = transactions(monitor);
    reset(monitor);
    AtomicReference<Map<String, Long>> statements = new AtomicReference<>();
    withPool(
        url,
        database -> {
          sendAll(database, operation, keys);
          statements.set(statements(monitor));
        });
    settle(monitor);
    long[] after = transactions(monitor);
    return new Counts(after[0] - before[0], after[1] - before[1], statements.get());
  }

  private interface PoolWork {
    void run(JoinedTransactionBenchmark.Database database) throws Exception;
  }

  /** A pool, the JDBC store and a guard on it, closed afterwards (its backends then exit). */
  private static void withPool(String url, PoolWork work) throws Exception {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url + "&ApplicationName=" + APPLICATION);
    config.setMaximumPoolSize(4);
    try (HikariDataSource pool = new HikariDataSource(config)) {
      JoinedTransactionBenchmark.Database database = new JoinedTransactionBenchmark.Database();
      database.dataSource = pool;
      database.jdbcStore = JdbcKeyStore.builder(pool).createSchemaIfMissing(true).build();
      try (IdempotencyGuard guard = IdempotencyGuard.builder().store(database.jdbcStore).build()) {
        database.guard = guard;
        work.run(database);
      }
    }
  }

  private static void sendAll(
      JoinedTransactionBenchmark.Database database, Operation operation, String[] keys)
      throws Exception {
    for (String key : keys) {
      operation.run(database, key);
    }
  }

  /**
   * Waits until the pools' backends have exited and the database's counts have stopped moving:
   * three equal readings 100 ms apart.
   */
  private static void settle(Connection monitor) throws SQLException {
    long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
    long[] last = null;
    int equal = 0;
    while (equal < 3) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "the database's counts did not settle in " + SETTLE_TIMEOUT);
      }
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
      if (backends(monitor) > 0) {
        equal = 0;
        continue;
      }
      long[] now = transactions(monitor);
      equal = last != null && last[0] == now[0] && last[1] == now[1] ? equal + 1 : 0;
      last = now;
    }
  }

  private static long backends(Connection monitor) throws SQLException {
    try (Statement statement = monitor.createStatement()) {
      statement.execute("SELECT pg_stat_clear_snapshot()");
    }
    try (PreparedStatement statement =
        monitor.prepareStatement(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = ?")) {
      statement.setString(1, APPLICATION);
      try (ResultSet rows = statement.executeQuery()) {
        rows.next();
        return rows.getLong(1);
      }
    }
  }

  private static long[] transactions(Connection monitor) throws SQLException {
    try (PreparedStatement statement =
            monitor.prepareStatement(
                "SELECT xact_commit, xact_rollback FROM pg_stat_database"
                    + " WHERE datname = current_database()");
        ResultSet rows = statement.executeQuery()) {
      rows.next();
      return new long[] {rows.getLong(1), rows.getLong(2)};
    }
  }

  private static void reset(Connection monitor) throws SQLException {
    try (Statement statement = monitor.createStatement()) {
      statement.execute("SELECT pg_stat_statements_reset()");
    }
  }

  /** Calls by statement, the census's own reading statements left out. */
  private static Map<String, Long> statements(Connection monitor) throws SQLException {
    Map<String, Long> calls = new TreeMap<>();
    try (Statement statement = monitor.createStatement();
        ResultSet rows =
            statement.executeQuery(
                "SELECT query, calls FROM pg_stat_statements"
                    + " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    + " AND query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%stats_fetch%'")) {
      while (rows.next()) {
        calls.merge(rows.getString(1).replaceAll("\\s+", " "), rows.getLong(2), Long::sum);
      }
    }
    return calls;
  }

  private static void print(String name, Counts few, Counts many, int calls) {
    double committed = (many.commits() - few.commits()) / (double) calls;
    double rolledBack = (many.rollbacks() - few.rollbacks()) / (double) calls;
    Map<String, Double> perCall = new TreeMap<>();
    double total = 0;
    Set<String> queries = new TreeSet<>(many.statements().keySet());
    queries.addAll(few.statements().keySet());
    for (String query : queries) {
      double each =
          (many.statements().getOrDefault(query, 0L) - few.statements().getOrDefault(query, 0L))
              / (double) calls;
      if (Math.abs(each) >= 0.005) {
        perCall.put(query, each);
        total += each;
      }
    }
    System.out.printf(
        "%n%s: %.2f statements, %.2f transactions committed, %.2f rolled back per call%n",
        name, total, committed, rolledBack);
    for (Map.Entry<String, Double> statement : perCall.entrySet()) {
      String query = statement.getKey();
      System.out.printf(
          "  %5.2f  %s%n",
          statement.getValue(), query.length() > 150 ? query.substring(0, 150) + "..." : query);
    }
  }
}
