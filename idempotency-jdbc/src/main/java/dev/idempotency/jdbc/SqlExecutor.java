package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.IntSupplier;
import javax.sql.DataSource;
import org.jdbi.v3.core.HandleCallback;
import org.jdbi.v3.core.Jdbi;
import org.jdbi.v3.core.JdbiException;
import org.jdbi.v3.core.statement.SqlStatements;
import org.jdbi.v3.core.statement.StatementExceptions;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a store's operations on borrowed connections: the wait for a connection bounded ({@link
 * #borrow}), the operation's statements cancelled past its one deadline ({@link StatementWatchdog})
 * and every socket read bounded a little later, none rendering bound values into messages,
 * rolled-back statements retried, and every other failure mapped by its SQLState to a {@link
 * KeyStoreException}.
 */
final class SqlExecutor {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);
  private static final int MAX_TRANSIENT_ATTEMPTS = 5;

  private final Jdbi jdbi;

  /** The pool the store was built on, or null if it was built on a {@link Jdbi}. */
  private final @Nullable DataSource dataSource;

  private final String tableName;

  /**
   * The socket read bound: past the statement's cancellation (the timeout, plus up to one sweep),
   * so that a database that answers gets to cancel the statement cleanly, and a connection to one
   * that does not is dropped soon after.
   */
  private final int networkTimeoutMillis;

  /** Time enough for the watchdog's sweep and the database's cancel before the socket gives up. */
  private static final long NETWORK_TIMEOUT_MARGIN_MILLIS = 500;

  private final StatementWatchdog watchdog;
  private volatile boolean networkTimeoutSupported = true;

  /** Where a cancel does not end a row-lock wait (H2): its bound, set once the dialect is known. */
  private volatile @Nullable LockWaitBound lockWaits;

  /** How connections are borrowed from {@link #dataSource}, or null if built on a Jdbi. */
  private final @Nullable ConnectionBorrower borrower;

  SqlExecutor(
      Jdbi jdbi, @Nullable DataSource dataSource, String tableName, JdbcKeyStore.Builder builder) {
    this.dataSource = dataSource;
    // a store on a DataSource gets a Jdbi of its own, whose connections are borrowed bounded too
    this.jdbi = dataSource == null ? jdbi : Jdbi.create(this::borrow);
    this.tableName = tableName;
    this.borrower =
        dataSource == null ? null : ConnectionBorrower.of(dataSource, builder.connectionWait);
    long timeoutMillis = Math.min(Integer.MAX_VALUE / 2, builder.operationTimeout.toMillis());
    this.watchdog = new StatementWatchdog(Duration.ofMillis(timeoutMillis));
    this.networkTimeoutMillis = (int) (timeoutMillis + NETWORK_TIMEOUT_MARGIN_MILLIS);
  }

  /**
   * Bounds the row-lock waits of every operation from now on with the session's own lock wait, for
   * a database whose lock waits a cancel does not end (H2).
   */
  void boundLockWaits(Statements sql) {
    this.lockWaits = new LockWaitBound(sql, watchdog.timeout(), watchdog);
  }

  /** The watchdog of this executor's statements, for those run as {@link PlainStatement}s. */
  StatementWatchdog watchdog() {
    return watchdog;
  }

  /**
   * Runs one operation on a borrowed connection. A deadlock or serialization failure rolled the
   * statement back, and every operation here is safe to run again then, so those are retried a few
   * times with a jittered pause (InnoDB reports concurrent purges that way).
   *
   * @param operation what the operation does, for messages ("claim", "purge")
   * @throws KeyStoreException if the database failed
   */
  <R> R call(String operation, HandleCallback<R, RuntimeException> work) {
    StatementWatchdog.Operation bounded = watchdog.begin();
    try {
      return callBounded(operation, work);
    } finally {
      watchdog.end(bounded);
    }
  }

  private <R> R callBounded(String operation, HandleCallback<R, RuntimeException> work) {
    for (int attempt = 1; ; attempt++) {
      try {
        return jdbi.withHandle(
            handle -> {
              // The handle's config is its own copy: the user's Jdbi stays as configured.
              handle
                  .getConfig(SqlStatements.class)
                  .setUnusedBindingAllowed(true)
                  .addCustomizer(watchdog);
              // Never render bound values (raw debug keys, owner tokens) into exception messages.
              handle
                  .getConfig(StatementExceptions.class)
                  .setMessageRendering(StatementExceptions.MessageRendering.NONE);
              Connection connection = handle.getConnection();
              int previousTimeout = boundNetworkTime(connection);
              LockWaitBound bound = lockWaits;
              String previousLockWait = bound == null ? null : bound.bound(connection);
              try {
                return work.withHandle(handle);
              } finally {
                if (bound != null) {
                  bound.restore(connection, previousLockWait);
                }
                restoreNetworkTime(connection, previousTimeout);
              }
            });
      } catch (KeyStoreException e) {
        throw e;
      } catch (JdbiException e) {
        retryOrThrow(operation, attempt, e);
      }
    }
  }

  /** Work on a borrowed connection with {@link PlainStatement}s. */
  @FunctionalInterface
  interface ConnectionWork<R> {
    R run(Connection connection);
  }

  /**
   * Runs one operation made of {@link PlainStatement}s, as {@link #call} does (the same bounds,
   * retries and failures), on a connection borrowed from the store's pool with no Jdbi handle
   * around it: a handle costs about a quarter of a single-key operation's client CPU
   * (BENCHMARKS.md, {@code JdbcClientCostBenchmark}). A store built on a {@link Jdbi} borrows
   * through it, which has no other way to its connections.
   */
  <R> R callPlain(String operation, ConnectionWork<R> work) {
    if (dataSource == null) {
      return call(operation, handle -> work.run(handle.getConnection()));
    }
    StatementWatchdog.Operation bounded = watchdog.begin();
    try {
      return callPlainBounded(operation, work);
    } finally {
      watchdog.end(bounded);
    }
  }

  private <R> R callPlainBounded(String operation, ConnectionWork<R> work) {
    for (int attempt = 1; ; attempt++) {
      Connection borrowed;
      try {
        borrowed = borrow();
      } catch (SQLException e) {
        throw new KeyStoreException(
            "JDBC store got no connection to " + operation + " on " + tableName + ": " + e, e);
      }
      try (Connection connection = borrowed) {
        int previousTimeout = boundNetworkTime(connection);
        LockWaitBound bound = lockWaits;
        String previousLockWait = bound == null ? null : bound.bound(connection);
        try {
          return work.run(connection);
        } finally {
          if (bound != null) {
            bound.restore(connection, previousLockWait);
          }
          restoreNetworkTime(connection, previousTimeout);
        }
      } catch (KeyStoreException e) {
        throw e;
      } catch (JdbiException e) {
        retryOrThrow(operation, attempt, e);
      } catch (SQLException e) {
        // giving back the connection failed
        throw new KeyStoreException(
            "JDBC store failed to " + operation + " on " + tableName + describe(e), e);
      }
    }
  }

  /** Returns to retry a transient failure after a pause; throws the mapped failure otherwise. */
  private void retryOrThrow(String operation, int attempt, JdbiException e) {
    if (attempt < MAX_TRANSIENT_ATTEMPTS && isTransient(e) && pause(attempt)) {
      log.debug("Retrying the {} after a transient failure{}", operation, describe(e));
      return;
    }
    String timedOut =
        watchdog.timedOut()
            ? ": it ran past its operationTimeout of "
                + watchdog.timeout().toMillis()
                + " ms (waiting on a lock, or a database that does not answer) and was cancelled"
            : "";
    throw new KeyStoreException(
        "JDBC store failed to " + operation + " on " + tableName + timedOut + describe(e), e);
  }

  /**
   * Runs an insert-if-absent: whether it inserted the row. A unique violation means a concurrent
   * insert won between the database's check and its insert, and counts as "not inserted".
   */
  static boolean insertedUnlessConflict(IntSupplier insert) {
    try {
      return insert.getAsInt() == 1;
    } catch (JdbiException e) {
      if (isUniqueViolation(e)) {
        return false;
      }
      throw e;
    }
  }

  /**
   * Borrows a connection from the pool, waiting at most the store's {@code connectionWait} and
   * never by interrupting the caller ({@link ConnectionBorrower}); past the wait it fails with
   * {@link SQLTransientConnectionException}, whose cause is the pool's last failure when there was
   * one.
   */
  Connection borrow() throws SQLException {
    if (borrower == null) {
      throw new IllegalStateException("a store built on a Jdbi borrows through it");
    }
    return borrower.borrow();
  }

  /** Detects the dialect from the connection's metadata. */
  JdbcDialect detectDialect() {
    try {
      return jdbi.withHandle(
          handle ->
              JdbcDialect.fromProductName(
                  handle.getConnection().getMetaData().getDatabaseProductName()));
    } catch (JdbiException e) {
      throw new KeyStoreException(
          "JDBC store could not reach the database to read its dialect" + describe(e), e);
    } catch (SQLException e) {
      throw new KeyStoreException(
          "JDBC store could not read the database's dialect (SQLState " + e.getSQLState() + ")", e);
    }
  }

  /**
   * Whether the store's table can be read: an empty select. A failure in SQLState class 42
   * (undefined table, no privilege) means it cannot; any other failure is the database's.
   *
   * @throws KeyStoreException if the database cannot be reached
   */
  boolean tableReadable(String probe) {
    try {
      return jdbi.withHandle(
          handle -> {
            handle.createQuery(probe).mapTo(String.class).list();
            return true;
          });
    } catch (JdbiException e) {
      SQLException cause = findSqlException(e);
      if (cause != null && cause.getSQLState() != null && cause.getSQLState().startsWith("42")) {
        return false;
      }
      throw new KeyStoreException(
          "JDBC store could not check its table " + tableName + describe(e), e);
    }
  }

  /**
   * Bounds every read of this operation on the socket ({@link Connection#setNetworkTimeout}), so a
   * database that stopped answering fails the operation in bounded time instead of hanging; returns
   * the connection's previous timeout, or -1 where the driver has none (H2 in memory).
   */
  private int boundNetworkTime(Connection connection) {
    if (!networkTimeoutSupported) {
      return -1;
    }
    try {
      int previous = connection.getNetworkTimeout();
      connection.setNetworkTimeout(Runnable::run, networkTimeoutMillis);
      return previous;
    } catch (SQLException | UnsupportedOperationException | AbstractMethodError e) {
      networkTimeoutSupported = false;
      log.debug("The JDBC driver has no network timeout; relying on statement cancellation", e);
      return -1;
    }
  }

  private static void restoreNetworkTime(Connection connection, int previous) {
    if (previous < 0) {
      return;
    }
    try {
      connection.setNetworkTimeout(Runnable::run, previous);
    } catch (SQLException e) {
      log.debug("Could not restore a connection's network timeout (it failed meanwhile)", e);
    }
  }

  private static boolean pause(int attempt) {
    try {
      Thread.sleep(ThreadLocalRandom.current().nextLong(5, 20L << attempt));
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** Deadlock victims and serialization failures: the statement was rolled back. */
  static boolean isTransient(JdbiException e) {
    SQLException sqlException = findSqlException(e);
    if (sqlException == null) {
      return false;
    }
    String state = sqlException.getSQLState();
    return "40001".equals(state) || "40P01".equals(state) || sqlException.getErrorCode() == 1213;
  }

  private static boolean isUniqueViolation(JdbiException e) {
    SQLException sqlException = findSqlException(e);
    if (sqlException == null) {
      return false;
    }
    String state = sqlException.getSQLState();
    return "23505".equals(state) || sqlException.getErrorCode() == 1062;
  }

  /** The SQLState and vendor code of a failure, for a message; never a bound value. */
  static String describe(Exception e) {
    SQLException sqlException = findSqlException(e);
    return sqlException == null
        ? ""
        : " (SQLState "
            + sqlException.getSQLState()
            + ", error "
            + sqlException.getErrorCode()
            + ")";
  }

  static SQLException findSqlException(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof SQLException sqlException) {
        return sqlException;
      }
    }
    return null;
  }
}
