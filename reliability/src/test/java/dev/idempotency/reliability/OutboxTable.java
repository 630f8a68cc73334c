package dev.idempotency.reliability;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * The outbox of a joined-transaction fault run: one row per enqueue, {@code (id, idempotency_key,
 * payload)}, with no unique constraint on the key, so that a key enqueued twice shows as two rows.
 * The SQL is fixed text; values are bound parameters.
 */
final class OutboxTable {

  static final String NAME = "fault_outbox";

  /** One committed row. */
  record Row(String key, String id) {
    String line() {
      return key + "|" + id;
    }

    static Row parse(String line) {
      String[] fields = line.split("\\|", -1);
      return new Row(fields[0], fields[1]);
    }
  }

  private OutboxTable() {}

  /** Creates the table if it is not there (PostgreSQL and MariaDB both know this form). */
  static void create(DataSource dataSource) throws SQLException {
    try (Connection connection = dataSource.getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(
          "CREATE TABLE IF NOT EXISTS "
              + NAME
              + " (id VARCHAR(64) PRIMARY KEY, idempotency_key VARCHAR(200) NOT NULL,"
              + " payload VARCHAR(200) NOT NULL)");
    }
  }

  /** Inserts one row through {@code connection}, in whatever transaction is open on it. */
  static void insert(Connection connection, String id, String key, String payload)
      throws SQLException {
    try (PreparedStatement insert =
        connection.prepareStatement(
            "INSERT INTO " + NAME + " (id, idempotency_key, payload) VALUES (?, ?, ?)")) {
      insert.setString(1, id);
      insert.setString(2, key);
      insert.setString(3, payload);
      insert.executeUpdate();
    }
  }

  /** Every committed row. */
  static List<Row> rows(DataSource dataSource) throws SQLException {
    List<Row> rows = new ArrayList<>();
    try (Connection connection = dataSource.getConnection();
        Statement statement = connection.createStatement();
        ResultSet result =
            statement.executeQuery("SELECT idempotency_key, id FROM " + NAME + " ORDER BY id")) {
      while (result.next()) {
        rows.add(new Row(result.getString(1), result.getString(2)));
      }
    }
    return rows;
  }
}
