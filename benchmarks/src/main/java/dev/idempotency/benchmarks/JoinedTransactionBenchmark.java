package dev.idempotency.benchmarks;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.Sender;
import dev.idempotency.jdbc.JdbcKeyStore;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * A first send that enqueues an outbox row, in the two modes of docs/outbox.md, on PostgreSQL:
 *
 * <ul>
 *   <li>{@code usualFirstSend}: {@code guard.execute} claims in a transaction of its own, the
 *       sender inserts the outbox row in a transaction of its own, the outcome is a third;
 *   <li>{@code joinedFirstSend}: one application transaction holds the claim, the insert and the
 *       outcome ({@code guard.executeInTransaction(store.joining(connection), ..)}), then commits;
 *   <li>{@code usualReplay}, {@code joinedReplay}: a key sent before in that mode, again (the
 *       joined replay opens and commits its transaction as the application would);
 *   <li>{@code floorOutboxInsert}: the application's transaction with the outbox insert alone, no
 *       guard.
 * </ul>
 *
 * All on one HikariCP pool of 32. {@link JoinedTransactionCensus} counts the statements and
 * transactions per call.
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar JoinedTransactionBenchmark -t 1 -bm sample -tu us
 * java -jar benchmarks/target/benchmarks.jar JoinedTransactionBenchmark -t 16 -bm thrpt -tu s
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 3, time = 5)
public class JoinedTransactionBenchmark {

  static final String OUTBOX_DDL =
      "CREATE TABLE IF NOT EXISTS bench_outbox (id VARCHAR(64) NOT NULL PRIMARY KEY,"
          + " phone VARCHAR(32) NOT NULL, body VARCHAR(200) NOT NULL)";

  private static final String INSERT =
      "INSERT INTO bench_outbox (id, phone, body) VALUES (?, ?, ?)";

  /** The database, the store and guard on it, and the replay keys of each mode. */
  @State(Scope.Benchmark)
  public static class Database {
    @Param({"postgresql"})
    public String store;

    Backend backend;
    DataSource dataSource;
    JdbcKeyStore jdbcStore;
    IdempotencyGuard guard;
    final String[] usualReplayKeys = new String[GuardBenchmark.REPLAY_KEYS];
    final String[] joinedReplayKeys = new String[GuardBenchmark.REPLAY_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      dataSource = backend.dataSource;
      jdbcStore = (JdbcKeyStore) backend.store;
      guard = IdempotencyGuard.builder().store(jdbcStore).build();
      try (Connection connection = dataSource.getConnection();
          Statement statement = connection.createStatement()) {
        statement.execute(OUTBOX_DDL);
      }
      String run = UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < usualReplayKeys.length; i++) {
        usualReplayKeys[i] = "usual-replay:" + run + ":" + i;
        usual(this, usualReplayKeys[i]);
        joinedReplayKeys[i] = "joined-replay:" + run + ":" + i;
        joined(this, joinedReplayKeys[i]);
      }
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      guard.close();
      backend.close();
    }
  }

  @Benchmark
  public String usualFirstSend(Database d, GuardBenchmark.Keys k) {
    return usual(d, k.newKey());
  }

  @Benchmark
  public String joinedFirstSend(Database d, GuardBenchmark.Keys k) throws SQLException {
    return joined(d, k.newKey());
  }

  @Benchmark
  public String usualReplay(Database d, GuardBenchmark.Keys k) {
    return usual(d, d.usualReplayKeys[k.replayIndex()]);
  }

  @Benchmark
  public String joinedReplay(Database d, GuardBenchmark.Keys k) throws SQLException {
    return joined(d, d.joinedReplayKeys[k.replayIndex()]);
  }

  @Benchmark
  public String floorOutboxInsert(Database d) throws SQLException {
    try (Connection connection = d.dataSource.getConnection()) {
      connection.setAutoCommit(false);
      String id = insertOutboxRow(connection);
      connection.commit();
      return id;
    }
  }

  /** The usual mode: the sender's insert commits in a transaction of its own. */
  static String usual(Database d, String key) {
    Sender<String> enqueue =
        ctx -> {
          try (Connection connection = d.dataSource.getConnection()) {
            connection.setAutoCommit(false);
            String id = insertOutboxRow(connection);
            connection.commit();
            return id;
          }
        };
    return d.guard.execute(key, Backend.TTL, enqueue);
  }

  /** The joined mode: claim, insert and outcome in the application's one transaction. */
  static String joined(Database d, String key) throws SQLException {
    try (Connection connection = d.dataSource.getConnection()) {
      connection.setAutoCommit(false);
      try {
        String id =
            d.guard.executeInTransaction(
                d.jdbcStore.joining(connection),
                key,
                Backend.TTL,
                ctx -> insertOutboxRow(connection));
        connection.commit();
        return id;
      } catch (RuntimeException e) {
        connection.rollback();
        throw e;
      }
    }
  }

  static String insertOutboxRow(Connection connection) throws SQLException {
    String id = UUID.randomUUID().toString();
    try (PreparedStatement insert = connection.prepareStatement(INSERT)) {
      insert.setString(1, id);
      insert.setString(2, "+15550100");
      insert.setString(3, "Your code is 123456");
      insert.executeUpdate();
    }
    return id;
  }
}
