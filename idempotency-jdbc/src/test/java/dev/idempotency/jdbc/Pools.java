package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;

/** The connection pools the store's tests run on, as an application's would. */
final class Pools {
  /**
   * The size of the contract's pools: enough for its most parallel cases and the connections they
   * hold open beside the store.
   */
  static final int CONTRACT_SIZE = 40;

  private Pools() {}

  /**
   * A HikariCP pool on {@code jdbcUrl} (credentials in the URL) of at most {@code size}
   * connections, built as Spring Boot builds it: without a connection at start, so that it can be
   * built while the database is down.
   */
  static HikariDataSource of(String jdbcUrl, int size) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(size);
    config.setInitializationFailTimeout(-1);
    return new HikariDataSource(config);
  }
}
