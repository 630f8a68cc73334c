package dev.idempotency.reliability;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.reliability.OutboxTable.Row;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import javax.sql.DataSource;

/**
 * The end of a joined-transaction fault run, once every client stopped: reads the committed outbox
 * rows, probes every key the clients could have used for its committed record, keeps both in the
 * run's directory ({@value #ROWS_FILE}, {@value #RECORDS_FILE}, {@code settled.txt}) and hands them
 * to {@link OutboxChecker}.
 */
final class OutboxProbe {

  static final String ROWS_FILE = "outbox.txt";
  static final String RECORDS_FILE = "records.txt";
  private static final String SETTLED_FILE = "settled.txt";

  /** What the probe's sender returns: never committed, since the probe always rolls back. */
  private static final String PROBE = "probe";

  private OutboxProbe() {}

  /** Reads, probes keys {@code 0..lastKey}, writes the files and checks. */
  static DuplicateChecker.Report settleAndCheck(JdbcKeyStore store, Path dir, long lastKey)
      throws IOException, SQLException {
    DataSource dataSource = store.dataSource().orElseThrow();
    List<Row> rows = OutboxTable.rows(dataSource);
    Map<String, String> committed = new TreeMap<>();
    List<String> stuck = new ArrayList<>();
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofSeconds(2)).build()) {
      for (long i = 0; i <= lastKey; i++) {
        probe(guard, store, dataSource, FaultRunChild.keyName(i), committed, stuck);
      }
    }
    Files.write(dir.resolve(ROWS_FILE), rows.stream().map(Row::line).toList());
    Files.write(
        dir.resolve(RECORDS_FILE),
        committed.entrySet().stream().map(e -> e.getKey() + "|" + e.getValue()).toList());
    Files.writeString(dir.resolve(SETTLED_FILE), "0\n" + String.join("\n", stuck) + "\n");
    return OutboxChecker.check(FaultHistory.read(dir), rows, committed, stuck);
  }

  /**
   * One key, in a transaction that is always rolled back: a committed record replays (its value is
   * kept), an absent one is claimed and the sender writes nothing, a key still locked by some
   * transaction is stuck.
   */
  private static void probe(
      IdempotencyGuard guard,
      JdbcKeyStore store,
      DataSource dataSource,
      String key,
      Map<String, String> committed,
      List<String> stuck)
      throws SQLException {
    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      try {
        Outcome<String> outcome =
            guard.executeInTransaction(
                store.joining(connection),
                IdempotencyRequest.of(key, FaultRunChild.TTL),
                ResultCodec.string(),
                ctx -> PROBE);
        if (outcome.replayed()) {
          committed.put(key, outcome.value());
        }
      } catch (IdempotencyInProgressException e) {
        stuck.add(key);
      } finally {
        connection.rollback();
        connection.setAutoCommit(true);
      }
    }
  }

  /** Checks a finished run's directory again, from its files. */
  static DuplicateChecker.Report recheck(Path dir) throws IOException {
    List<Row> rows = Files.readAllLines(dir.resolve(ROWS_FILE)).stream().map(Row::parse).toList();
    Map<String, String> committed = new TreeMap<>();
    for (String line : Files.readAllLines(dir.resolve(RECORDS_FILE))) {
      String[] fields = line.split("\\|", -1);
      committed.put(fields[0], fields[1]);
    }
    List<String> settled = Files.readAllLines(dir.resolve(SETTLED_FILE));
    List<String> stuck =
        settled.subList(1, settled.size()).stream().filter(k -> !k.isBlank()).toList();
    return OutboxChecker.check(FaultHistory.read(dir), rows, committed, stuck);
  }
}
