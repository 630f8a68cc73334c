package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import com.zaxxer.hikari.HikariPoolMXBean;
import com.zaxxer.hikari.pool.HikariPool;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;

/**
 * HikariCP's own bounded wait: {@code HikariPool.getConnection(timeoutMs)} waits at most the
 * store's connection wait, whatever the pool's {@code connectionTimeout}, and its failure carries
 * the cause Hikari saw when it last tried to connect. Loaded only when HikariCP is on the class
 * path ({@link ConnectionBorrower#of}).
 */
final class HikariBorrower extends ConnectionBorrower {

  private final HikariDataSource dataSource;
  private final ConnectionBorrower beforeStart;

  private HikariBorrower(HikariDataSource dataSource, Duration wait) {
    super(wait);
    this.dataSource = dataSource;
    this.beforeStart = new HandOff(dataSource, wait);
  }

  /** The borrower for a Hikari pool, or null if the pool is another kind. */
  static @Nullable ConnectionBorrower of(DataSource dataSource, Duration wait) {
    // exactly Hikari's class: a subclass may lend connections its own way
    if (dataSource.getClass() != HikariDataSource.class) {
      return null;
    }
    return new HikariBorrower((HikariDataSource) dataSource, wait);
  }

  @Override
  Connection borrow() throws SQLException {
    HikariPoolMXBean pool = dataSource.getHikariPoolMXBean();
    if (pool instanceof HikariPool started) {
      try {
        return started.getConnection(wait.toMillis());
      } catch (SQLTransientConnectionException timedOut) {
        throw noConnection(timedOut); // Hikari's, with the cause it last saw, as the cause
      }
    }
    // a pool configured through setters starts on its first borrow, with its own timeout: hand off
    return beforeStart.borrow();
  }
}
