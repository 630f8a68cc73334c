package dev.idempotency.benchmarks;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jdbi.v3.core.Jdbi;
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
 * What the JDBC client path costs around one statement, to explain the PostgreSQL gap at 16 threads
 * in {@link PeersBenchmark} (issue #18): the same primary-key {@code SELECT} of a stored record
 * through plain JDBC, through a Jdbi handle with a plain {@code PreparedStatement} on its
 * connection, and through Jdbi's statement API, as the JDBC store issues its statements. On this
 * 2-core machine the client's CPU and the database's share the cores, so the client's cost per
 * statement shows as throughput.
 *
 * <pre>
 * java -jar benchmarks/target/benchmarks.jar JdbcClientCostBenchmark -t 16 -bm thrpt -tu s
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
public class JdbcClientCostBenchmark {

  private static final String SELECT =
      "SELECT state, payload, retain_until FROM bench_floor WHERE key_id = ";

  /** The database with {@link GuardBenchmark#REPLAY_KEYS} rows in the floor's table. */
  @State(Scope.Benchmark)
  public static class Database {
    @Param({"postgresql-durable"})
    public String store;

    Backend backend;
    DataSource dataSource;
    Jdbi jdbi;
    final String[] keys = new String[GuardBenchmark.REPLAY_KEYS];

    @Setup(Level.Trial)
    public void start() throws Exception {
      backend = Backend.start(store);
      dataSource = backend.dataSource;
      jdbi = Jdbi.create(dataSource);
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "client-cost:" + i;
        backend.floor.firstSend(keys[i]);
      }
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
      backend.close();
    }
  }

  @Benchmark
  public byte[] plainJdbc(Database d, GuardBenchmark.Keys k) throws SQLException {
    try (Connection connection = d.dataSource.getConnection()) {
      return select(connection, d.keys[k.replayIndex()]);
    }
  }

  @Benchmark
  public byte[] jdbiHandlePlainStatement(Database d, GuardBenchmark.Keys k) {
    String key = d.keys[k.replayIndex()];
    return d.jdbi.withHandle(
        handle -> {
          try {
            return select(handle.getConnection(), key);
          } catch (SQLException e) {
            throw new IllegalStateException(e);
          }
        });
  }

  @Benchmark
  public Map<String, Object> jdbiStatement(Database d, GuardBenchmark.Keys k) {
    String key = d.keys[k.replayIndex()];
    return d.jdbi.withHandle(
        handle -> handle.createQuery(SELECT + ":k").bind("k", key).mapToMap().one());
  }

  private static byte[] select(Connection connection, String key) throws SQLException {
    try (PreparedStatement statement = connection.prepareStatement(SELECT + "?")) {
      statement.setString(1, key);
      try (ResultSet rows = statement.executeQuery()) {
        rows.next();
        return rows.getBytes(2);
      }
    }
  }
}
