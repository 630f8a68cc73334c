package dev.idempotency.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;

/**
 * Borrows connections from the store's pool within its connection wait, never by interrupting the
 * caller (a request or listener thread of the application: an interrupt the application raised
 * would be lost, and pools and drivers differ in what one does to them).
 *
 * <ul>
 *   <li>A HikariCP pool is asked with its own bounded wait ({@code
 *       HikariPool.getConnection(long)}), on the caller's thread: no hand-off, and Hikari's failure
 *       names the cause it saw (a refused connection, an authentication failure).
 *   <li>Any other pool is asked on a thread of the store's ({@code idempotency-jdbc-borrow-N}, at
 *       most {@value #MAX_BORROWERS}, daemon, created on demand and gone after a minute idle); the
 *       caller waits for the answer at most the connection wait. A connection that arrives after
 *       the caller gave up goes straight back to the pool.
 * </ul>
 *
 * <p>Thread-safe.
 */
abstract class ConnectionBorrower {

  /** Threads borrowing at once for a pool that is not HikariCP: as many as callers wait, up to. */
  static final int MAX_BORROWERS = 64;

  final Duration wait;

  ConnectionBorrower(Duration wait) {
    this.wait = wait;
  }

  /** The borrower for this pool: HikariCP's own bounded wait if it is one, a hand-off otherwise. */
  static ConnectionBorrower of(DataSource dataSource, Duration wait) {
    ConnectionBorrower hikari =
        HikariSupport.PRESENT ? HikariSupport.borrower(dataSource, wait) : null;
    return hikari != null ? hikari : new HandOff(dataSource, wait);
  }

  /**
   * A connection within the wait.
   *
   * @throws SQLTransientConnectionException if none came within it, with the pool's last failure as
   *     its cause when there was one
   * @throws SQLException if the pool failed
   */
  abstract Connection borrow() throws SQLException;

  SQLTransientConnectionException noConnection(@Nullable Throwable cause) {
    return new SQLTransientConnectionException(
        "no connection within " + wait.toMillis() + " ms (connectionWait)", cause);
  }

  /** Loads HikariCP's types only when HikariCP is there. */
  private static final class HikariSupport {
    static final boolean PRESENT = present();

    private static boolean present() {
      try {
        Class.forName(
            "com.zaxxer.hikari.HikariDataSource", false, ConnectionBorrower.class.getClassLoader());
        return true;
      } catch (ClassNotFoundException | LinkageError absent) {
        return false;
      }
    }

    static @Nullable ConnectionBorrower borrower(DataSource dataSource, Duration wait) {
      try {
        return HikariBorrower.of(dataSource, wait);
      } catch (LinkageError otherVersion) {
        return null; // a HikariCP without the method: the hand-off serves it
      }
    }
  }

  /** For any pool: borrows on a thread of the store's, so the caller can stop waiting. */
  static final class HandOff extends ConnectionBorrower {
    private static final AtomicInteger THREADS = new AtomicInteger();

    private final DataSource dataSource;
    private final ThreadPoolExecutor borrowers;
    private volatile @Nullable Throwable lastFailure;

    HandOff(DataSource dataSource, Duration wait) {
      super(wait);
      this.dataSource = dataSource;
      this.borrowers =
          new ThreadPoolExecutor(
              0,
              MAX_BORROWERS,
              60,
              TimeUnit.SECONDS,
              new SynchronousQueue<>(),
              task -> {
                Thread thread =
                    new Thread(task, "idempotency-jdbc-borrow-" + THREADS.incrementAndGet());
                thread.setDaemon(true);
                return thread;
              });
    }

    @Override
    Connection borrow() throws SQLException {
      CompletableFuture<Connection> answer = new CompletableFuture<>();
      try {
        borrowers.execute(() -> borrowFor(answer));
      } catch (RejectedExecutionException allBusy) {
        // MAX_BORROWERS waits already hang on the pool: this one would too
        throw noConnection(lastFailure);
      }
      try {
        return answer.get(wait.toNanos(), TimeUnit.NANOSECONDS);
      } catch (TimeoutException late) {
        giveUp(answer);
        throw noConnection(lastFailure);
      } catch (InterruptedException interrupted) {
        giveUp(answer);
        Thread.currentThread().interrupt(); // the application's: kept
        throw new SQLTransientConnectionException(
            "interrupted while waiting for a connection", interrupted);
      } catch (ExecutionException failed) {
        Throwable cause = failed.getCause();
        if (cause instanceof SQLException e) {
          throw e;
        }
        if (cause instanceof RuntimeException e) {
          throw e;
        }
        throw new SQLException("the pool failed to lend a connection", cause);
      } catch (CancellationException cannotHappen) {
        throw noConnection(lastFailure);
      }
    }

    /** On a borrower thread: the connection to the waiting caller, or back to the pool if gone. */
    private void borrowFor(CompletableFuture<Connection> answer) {
      Connection connection;
      try {
        connection = dataSource.getConnection();
      } catch (SQLException | RuntimeException e) {
        lastFailure = e;
        answer.completeExceptionally(e);
        return;
      } catch (Error e) {
        answer.completeExceptionally(e);
        throw e;
      }
      lastFailure = null;
      if (!answer.complete(connection)) {
        closeQuietly(connection); // the caller gave up: back to the pool
      }
    }

    /** The caller stops waiting; a connection that raced in meanwhile goes back to the pool. */
    private static void giveUp(CompletableFuture<Connection> answer) {
      if (!answer.completeExceptionally(new TimeoutException("gave up"))) {
        Connection connection = answer.getNow(null);
        if (connection != null) {
          closeQuietly(connection);
        }
      }
    }

    private static void closeQuietly(@Nullable Connection connection) {
      if (connection == null) {
        return;
      }
      try {
        connection.close();
      } catch (SQLException | RuntimeException ignored) {
        // a connection the pool cannot take back is the pool's to drop
      }
    }
  }
}
