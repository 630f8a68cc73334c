package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;

/** The connection pool the contract's stores run on, as an application's would. */
final class Pools {
  private Pools() {}

  /**
   * A HikariCP pool on {@code jdbcUrl} (credentials in the URL), large enough for the contract's
   * most parallel cases and the connections they hold open beside the store.
   */
  static HikariDataSource of(String jdbcUrl) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(40);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(60_000);
    return new HikariDataSource(config);
  }
}
