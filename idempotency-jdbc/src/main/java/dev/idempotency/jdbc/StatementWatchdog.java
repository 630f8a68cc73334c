package dev.idempotency.jdbc;

import dev.idempotency.spi.OperationDeadlines;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.jdbi.v3.core.statement.StatementContext;
import org.jdbi.v3.core.statement.StatementCustomizer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Cancels the store's statements that run past their operation timeout, as {@link
 * Statement#setQueryTimeout} would, at a fraction of its cost: each statement is watched by {@link
 * OperationDeadlines} (one sweeping thread for all), where PostgreSQL's driver implements a query
 * timeout with a timer task per statement that wakes a timer thread each time: measured in the
 * peers harness, about 20 µs of a 144 µs replay on a 2-core machine. A cancelled statement fails
 * with the database's query-cancelled error, and its connection stays usable.
 */
final class StatementWatchdog implements StatementCustomizer {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);

  private static final AtomicInteger CANCELLER_COUNT = new AtomicInteger();

  /** Cancelling opens a connection to the database and may wait on it: never on the sweeper. */
  private static final ExecutorService CANCELLERS =
      Executors.newCachedThreadPool(
          task -> {
            Thread thread =
                new Thread(task, "idempotency-jdbc-cancel-" + CANCELLER_COUNT.incrementAndGet());
            thread.setDaemon(true);
            return thread;
          });

  private final Duration timeout;

  StatementWatchdog(Duration timeout) {
    this.timeout = timeout;
  }

  @Override
  public void beforeExecution(PreparedStatement statement, StatementContext context) {
    // the context closes whether the statement succeeded or failed
    context.addCleanable(watch(statement)::done);
  }

  /** Watches a statement about to run; the caller ends the watch when the statement has ended. */
  OperationDeadlines.Watch watch(Statement statement) {
    return OperationDeadlines.watch(timeout, () -> CANCELLERS.execute(() -> cancel(statement)));
  }

  private static void cancel(Statement statement) {
    try {
      statement.cancel();
    } catch (SQLException | RuntimeException e) {
      log.debug("Could not cancel a statement past its operation timeout", e);
    }
  }
}
