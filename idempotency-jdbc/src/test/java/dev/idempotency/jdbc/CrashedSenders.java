package dev.idempotency.jdbc;

import dev.idempotency.IdempotencyGuard;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.sql.DataSource;

/**
 * Rows of senders that crashed, for the batch tests that need them ({@link BatchDeadlineCase},
 * {@link PostgresBatchUndoConnectionLostTest}), and a look at the rows in progress. Table names are
 * the tests' constants; tokens are bound as parameters.
 */
final class CrashedSenders {

  /** Every test token starts so: {@link #crash} never re-marks a row another crash marked. */
  static final String TOKEN_PREFIX = "crashed";

  private static final Duration TTL = Duration.ofHours(1);

  private CrashedSenders() {}

  /**
   * A sender that crashed: its row of {@code key} stays {@code IN_PROGRESS} under {@code token}
   * (which must start with {@value #TOKEN_PREFIX}), its lease as the guard's clock gave it.
   */
  static void crash(
      IdempotencyGuard guard, DataSource pool, String table, String key, String token) {
    crash(guard, pool, table, key, token, false);
  }

  /** As {@link #crash}, with the lease lapsed long ago in the table's own terms. */
  static void crashWithLapsedLease(
      IdempotencyGuard guard, DataSource pool, String table, String key, String token) {
    crash(guard, pool, table, key, token, true);
  }

  private static void crash(
      IdempotencyGuard guard,
      DataSource pool,
      String table,
      String key,
      String token,
      boolean lapsed) {
    if (!token.startsWith(TOKEN_PREFIX)) {
      throw new IllegalArgumentException("a crashed sender's token starts with crashed: " + token);
    }
    guard.execute(
        key,
        TTL,
        ctx -> {
          try (Connection connection = pool.getConnection();
              PreparedStatement update =
                  connection.prepareStatement(
                      "UPDATE "
                          + table
                          + " SET owner_token = ?"
                          + (lapsed ? ", lease_until = 1" : "")
                          + " WHERE state = 'IN_PROGRESS' AND owner_token NOT LIKE '"
                          + TOKEN_PREFIX
                          + "%'")) {
            update.setString(1, token);
            update.executeUpdate();
          }
          return "crashed";
        });
  }

  /** Every row in progress: owner token / attempt, by key id. */
  static Map<String, String> inProgressRows(DataSource pool, String table) throws SQLException {
    Map<String, String> rows = new LinkedHashMap<>();
    try (Connection connection = pool.getConnection();
        Statement select = connection.createStatement();
        ResultSet found =
            select.executeQuery(
                "SELECT key_id, owner_token, attempt FROM "
                    + table
                    + " WHERE state = 'IN_PROGRESS'")) {
      while (found.next()) {
        rows.put(found.getString(1), found.getString(2) + "/" + found.getInt(3));
      }
    }
    return rows;
  }
}
