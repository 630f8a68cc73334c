package dev.idempotency.jdbc;

import java.sql.Connection;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The bound on row-lock waits where cancelling a statement does not end them: H2 2.x waits for a
 * row lock in its transaction's own wait, for the session's {@code LOCK_TIMEOUT}, whatever the
 * watchdog's {@link java.sql.Statement#cancel()} asks. So each of the store's own operations on H2
 * lowers the session's lock wait to the operation timeout when it is longer, and puts it back
 * after: the connection is borrowed, and may be the application's too. A lock wait that runs out
 * fails as a lock-wait timeout, which a claim reads as "in flight" as it reads a cancel elsewhere.
 * PostgreSQL and MySQL/MariaDB need none: the cancel ends their waits.
 */
final class LockWaitBound {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);

  private final Statements sql;
  private final PlainStatement read;
  private final PlainStatement set;
  private final Duration timeout;
  private final StatementWatchdog watchdog;

  LockWaitBound(Statements sql, Duration timeout, StatementWatchdog watchdog) {
    this.sql = sql;
    this.read = new PlainStatement(sql.readLockWait());
    this.set = new PlainStatement(sql.setLockWait());
    this.timeout = timeout;
    this.watchdog = watchdog;
  }

  /**
   * Lowers the session's lock wait to the operation timeout if it is longer.
   *
   * @return the session's lock wait before, to {@link #restore}, or null if it was not changed
   */
  @Nullable String bound(Connection connection) {
    String previous =
        read.query(
            connection,
            watchdog,
            name -> null,
            rows -> {
              rows.next();
              return rows.getString(1);
            });
    if (previous != null && withinTimeout(previous.trim())) {
      return null;
    }
    Object value = sql.lockWaitValue(timeout);
    set.execute(connection, watchdog, name -> value);
    return previous;
  }

  /** Puts the session's lock wait back as {@link #bound} found it. */
  void restore(Connection connection, @Nullable String previous) {
    if (previous == null) {
      return;
    }
    try {
      Object value = sql.restoredLockWait(previous.trim());
      set.execute(connection, watchdog, name -> value);
    } catch (RuntimeException e) {
      log.debug("Could not restore a connection's lock wait (it failed meanwhile)", e);
    }
  }

  /** Whether a lock wait in milliseconds (H2's unit) already ends within the operation timeout. */
  private boolean withinTimeout(String millis) {
    try {
      long wait = Long.parseLong(millis);
      return wait >= 0 && wait <= timeout.toMillis();
    } catch (NumberFormatException e) {
      return false;
    }
  }
}
