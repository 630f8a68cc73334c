package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jdbi.v3.core.JdbiException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class PlainStatementTest {

  private final StatementWatchdog watchdog = new StatementWatchdog(Duration.ofSeconds(5));
  private Connection connection;

  @BeforeEach
  void open() throws SQLException {
    connection = DriverManager.getConnection("jdbc:h2:mem:plain" + System.nanoTime());
    try (Statement statement = connection.createStatement()) {
      statement.execute(
          "CREATE TABLE t (k VARCHAR(64) PRIMARY KEY, n BIGINT, payload VARBINARY(64), note"
              + " VARCHAR(64))");
    }
  }

  @AfterEach
  void close() throws SQLException {
    connection.close();
  }

  @Test
  void namedParametersBecomePositionsInOrderAndRepeatedNamesRepeat() {
    List<String> names = new ArrayList<>();

    String sql =
        PlainStatement.positional(
            "UPDATE t SET n = CAST(:now AS BIGINT) + :lease WHERE k = :keyId AND n < :now", names);

    assertThat(sql).isEqualTo("UPDATE t SET n = CAST(? AS BIGINT) + ? WHERE k = ? AND n < ?");
    assertThat(names).containsExactly("now", "lease", "keyId", "now");
  }

  @Test
  void colonsInLiteralsAndCastsAreNotParameters() {
    List<String> names = new ArrayList<>();

    String sql =
        PlainStatement.positional(
            "SELECT 'a:b', x::text, set_config('x', 'off', true) FROM t WHERE k = :k", names);

    assertThat(sql)
        .isEqualTo("SELECT 'a:b', x::text, set_config('x', 'off', true) FROM t WHERE k = ?");
    assertThat(names).containsExactly("k");
  }

  @Test
  void anUnterminatedLiteralIsRefused() {
    assertThatThrownBy(() -> new PlainStatement("SELECT 'a FROM t WHERE k = :k"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unterminated string literal");
  }

  @Test
  void valuesAreBoundByNameIncludingNullsAndReadBack() {
    PlainStatement insert =
        new PlainStatement("INSERT INTO t (k, n, payload, note) VALUES (:k, :n, :payload, :note)");
    PlainStatement select = new PlainStatement("SELECT n, payload, note FROM t WHERE k = :k");

    int inserted =
        insert.update(
            connection,
            watchdog,
            name ->
                switch (name) {
                  case "k" -> "key-1";
                  case "n" -> 42L;
                  default -> null;
                });
    List<Object> row =
        select.query(
            connection,
            watchdog,
            name -> "key-1",
            rows -> {
              rows.next();
              return java.util.Arrays.asList(rows.getLong(1), rows.getBytes(2), rows.getString(3));
            });

    assertThat(inserted).isEqualTo(1);
    assertThat(row).containsExactly(42L, null, null);
  }

  @Test
  void aValueOfAnUnsupportedTypeIsRefusedByName() {
    PlainStatement select = new PlainStatement("SELECT n FROM t WHERE k = :k");

    assertThatThrownBy(() -> select.query(connection, watchdog, name -> 3.5, rows -> rows.next()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("parameter k")
        .hasMessageContaining("java.lang.Double");
  }

  @Test
  void aFailureIsAJdbiExceptionWithTheSqlStateAndNoBoundValue() {
    PlainStatement insert = new PlainStatement("INSERT INTO t (k, n) VALUES (:k, :n)");
    PlainStatement.Values values = name -> name.equals("k") ? "secret-key" : 1L;
    insert.update(connection, watchdog, values);

    assertThatThrownBy(() -> insert.update(connection, watchdog, values))
        .isInstanceOf(JdbiException.class)
        .hasMessageContaining("SQLState 23505")
        .hasMessageNotContaining("secret-key")
        .hasCauseInstanceOf(SQLException.class);
  }
}
