package dev.idempotency.jdbc;

import dev.idempotency.spi.OperationDeadlines;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import org.jdbi.v3.core.JdbiException;
import org.jspecify.annotations.Nullable;

/**
 * One of the statements of the store's single-key operations (claim, complete, release, extend),
 * run through plain JDBC instead of Jdbi's statement API, which costs about twice the client CPU
 * per statement (BENCHMARKS.md, run 8, {@code JdbcClientCostBenchmark}): on a machine the database
 * shares, that is throughput. Batches bind the same names through Jdbi ({@link #namedSql}, {@link
 * #parameterNames}).
 *
 * <p>The statement keeps the store's named parameters ({@code :keyId}); they become positions once,
 * here. Values are bound by name, each name once per position; a value the statement does not use
 * is never asked for. Each run is watched by the {@link StatementWatchdog} like the statements Jdbi
 * runs, and a failure is a {@link JdbiException} carrying the {@link SQLException}, so {@link
 * SqlExecutor} maps it like any other: by SQLState, never with a bound value in the message.
 */
final class PlainStatement {

  /** A statement's values, by parameter name. */
  @FunctionalInterface
  interface Values {
    /**
     * The value of parameter {@code name}: a {@code String}, {@code Long}, {@code Integer} or
     * {@code byte[]}, or null.
     */
    @Nullable Object value(String name);
  }

  /** Reads the result of a query; positioned before its first row. */
  @FunctionalInterface
  interface Reader<R> {
    R read(ResultSet rows) throws SQLException;
  }

  /** The parameters bound as binary when null; every other null is bound as a string. */
  private static final String BINARY_PARAMETER = "payload";

  private final String namedSql;
  private final String sql;
  private final String[] names;
  private final List<String> distinctNames;

  PlainStatement(String namedSql) {
    List<String> found = new ArrayList<>();
    this.namedSql = namedSql;
    this.sql = positional(namedSql, found);
    this.names = found.toArray(String[]::new);
    this.distinctNames = found.stream().distinct().toList();
  }

  /** The statement with its named parameters, as Jdbi takes it. */
  String namedSql() {
    return namedSql;
  }

  /** The names of its parameters, each once. */
  List<String> parameterNames() {
    return distinctNames;
  }

  /** Runs an update: the number of rows it changed. */
  int update(Connection connection, StatementWatchdog watchdog, Values values) {
    try (PreparedStatement statement = prepare(connection, values)) {
      OperationDeadlines.Watch watch = watchdog.watch(statement);
      try {
        return statement.executeUpdate();
      } finally {
        watch.done();
      }
    } catch (SQLException e) {
      throw new Failed(e);
    }
  }

  /** Runs a statement that may or may not return rows (a session setting), ignoring its result. */
  void execute(Connection connection, StatementWatchdog watchdog, Values values) {
    try (PreparedStatement statement = prepare(connection, values)) {
      OperationDeadlines.Watch watch = watchdog.watch(statement);
      try {
        statement.execute();
      } finally {
        watch.done();
      }
    } catch (SQLException e) {
      throw new Failed(e);
    }
  }

  /** Runs a query and reads its result. */
  <R> R query(Connection connection, StatementWatchdog watchdog, Values values, Reader<R> reader) {
    try (PreparedStatement statement = prepare(connection, values)) {
      OperationDeadlines.Watch watch = watchdog.watch(statement);
      try (ResultSet rows = statement.executeQuery()) {
        return reader.read(rows);
      } finally {
        watch.done();
      }
    } catch (SQLException e) {
      throw new Failed(e);
    }
  }

  private PreparedStatement prepare(Connection connection, Values values) throws SQLException {
    PreparedStatement statement = connection.prepareStatement(sql);
    try {
      for (int i = 0; i < names.length; i++) {
        bind(statement, i + 1, names[i], values.value(names[i]));
      }
      return statement;
    } catch (SQLException | RuntimeException e) {
      statement.close();
      throw e;
    }
  }

  private static void bind(PreparedStatement statement, int position, String name, Object value)
      throws SQLException {
    if (value == null) {
      statement.setNull(position, BINARY_PARAMETER.equals(name) ? Types.VARBINARY : Types.VARCHAR);
    } else if (value instanceof String text) {
      statement.setString(position, text);
    } else if (value instanceof Long number) {
      statement.setLong(position, number);
    } else if (value instanceof Integer number) {
      statement.setInt(position, number);
    } else if (value instanceof byte[] bytes) {
      statement.setBytes(position, bytes);
    } else {
      throw new IllegalArgumentException(
          "parameter " + name + " has a value of unsupported type " + value.getClass().getName());
    }
  }

  /**
   * Replaces each {@code :name} outside string literals with {@code ?}, adding the names in order.
   */
  static String positional(String namedSql, List<String> names) {
    StringBuilder out = new StringBuilder(namedSql.length());
    boolean inLiteral = false;
    int i = 0;
    while (i < namedSql.length()) {
      char c = namedSql.charAt(i);
      if (c == '\'') {
        inLiteral = !inLiteral;
      } else if (!inLiteral
          && c == ':'
          && i + 1 < namedSql.length()
          && Character.isJavaIdentifierStart(namedSql.charAt(i + 1))
          && (i == 0 || namedSql.charAt(i - 1) != ':')) {
        int end = i + 1;
        while (end < namedSql.length() && Character.isJavaIdentifierPart(namedSql.charAt(end))) {
          end++;
        }
        names.add(namedSql.substring(i + 1, end));
        out.append('?');
        i = end;
        continue;
      }
      out.append(c);
      i++;
    }
    if (inLiteral) {
      throw new IllegalArgumentException("unterminated string literal in a statement");
    }
    return out.toString();
  }

  /** A plain statement's failure, as Jdbi would have reported it: the cause is the SQLException. */
  static final class Failed extends JdbiException {
    Failed(SQLException cause) {
      super("JDBC statement failed (SQLState " + cause.getSQLState() + ")", cause);
    }
  }
}
