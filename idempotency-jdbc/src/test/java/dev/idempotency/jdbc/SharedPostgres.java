package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.regex.Pattern;

/**
 * One embedded PostgreSQL 17 per test JVM, started by the first class that asks and stopped when
 * the JVM ends, and a database of its own per test class: the classes of a fork run one after
 * another, and a database keeps each one's tables, connections and {@code ALLOW_CONNECTIONS} apart.
 * A class that stops or restarts its server starts its own instead.
 */
final class SharedPostgres {

  /** Database names are written into SQL: fixed names of the tests, checked all the same. */
  private static final Pattern DATABASE_NAME = Pattern.compile("[a-z][a-z0-9_]{0,62}");

  private static EmbeddedPostgres server;

  private SharedPostgres() {}

  /** The server, started on first use (with a generous start-up wait for a busy machine). */
  static synchronized EmbeddedPostgres server() {
    if (server == null) {
      try {
        EmbeddedPostgres started =
            EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
        Runtime.getRuntime()
            .addShutdownHook(
                new Thread(
                    () -> {
                      try {
                        started.close();
                      } catch (IOException ignored) {
                        // the JVM ends either way
                      }
                    },
                    "shared-postgres-stop"));
        server = started;
      } catch (IOException e) {
        throw new UncheckedIOException("could not start the embedded PostgreSQL", e);
      }
    }
    return server;
  }

  /** The JDBC URL of {@code database}, created if it does not exist yet. */
  static String jdbcUrl(String database) {
    if (!DATABASE_NAME.matcher(database).matches()) {
      throw new IllegalArgumentException("not a plain database name: " + database);
    }
    if (!exists(database)) {
      admin("CREATE DATABASE " + database);
    }
    return server().getJdbcUrl("postgres", database);
  }

  /** A pool of at most {@code size} connections to {@code database} ({@link Pools#of}). */
  static HikariDataSource pool(String database, int size) {
    return Pools.of(jdbcUrl(database), size);
  }

  /** Runs a statement as the server's superuser, on the {@code postgres} database. */
  static void admin(String sql) {
    try (Connection connection = server().getPostgresDatabase().getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(sql);
    } catch (SQLException e) {
      throw new IllegalStateException(sql, e);
    }
  }

  /**
   * The database takes no new connection, and its open ones are terminated (a database outage that
   * leaves the server and the other classes' databases up).
   */
  static void refuseConnections(String database) {
    jdbcUrl(database); // checks the name
    admin("ALTER DATABASE " + database + " ALLOW_CONNECTIONS false");
    admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"
            + database
            + "' AND pid <> pg_backend_pid()");
  }

  /** Ends {@link #refuseConnections}. */
  static void allowConnections(String database) {
    jdbcUrl(database);
    admin("ALTER DATABASE " + database + " ALLOW_CONNECTIONS true");
  }

  private static boolean exists(String database) {
    try (Connection connection = server().getPostgresDatabase().getConnection();
        var statement =
            connection.prepareStatement("SELECT 1 FROM pg_database WHERE datname = ?")) {
      statement.setString(1, database);
      try (ResultSet rows = statement.executeQuery()) {
        return rows.next();
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not list the databases", e);
    }
  }
}
