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
 *
 * <p>The timeout bounds a store operation, not each of its statements: {@link SqlExecutor} opens an
 * {@link Operation} on the calling thread around its work, its deadline starts with the first
 * statement (once the operation has a connection), and every statement of it is watched to that one
 * deadline. A statement outside an operation (a joined transaction's) gets the whole timeout.
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

  /** The operation running on this thread, if any. */
  private final ThreadLocal<Operation> current = new ThreadLocal<>();

  StatementWatchdog(Duration timeout) {
    this.timeout = timeout;
  }

  /** One store operation's deadline, shared by its statements; used by the thread that runs it. */
  static final class Operation {

    /** The deadline ({@link System#nanoTime}), once {@link #started}. */
    private long deadline;

    /** Whether a statement has started: the deadline runs from the first. */
    private boolean started;

    /** Set by the sweeper when it cancelled one of this operation's statements. */
    private volatile boolean timedOut;
  }

  /**
   * Opens an operation on this thread, unless one is open already (an operation that calls
   * another): the caller then gets null, and must pass what it got to {@link #end}.
   */
  Operation begin() {
    if (current.get() != null) {
      return null;
    }
    Operation operation = new Operation();
    current.set(operation);
    return operation;
  }

  /** Ends the operation {@link #begin} opened; does nothing for null. */
  void end(Operation operation) {
    if (operation != null) {
      current.remove();
    }
  }

  /** Whether the operation on this thread had a statement cancelled because its deadline passed. */
  boolean timedOut() {
    Operation operation = current.get();
    return operation != null && operation.timedOut;
  }

  /** The bound of every operation, as configured. */
  Duration timeout() {
    return timeout;
  }

  /**
   * Gives the operation on this thread at least {@code grace} from now, for one short statement
   * that must run even after the deadline passed (a read that tells a lock held by a joined
   * transaction from a store failure).
   */
  void allowAtLeast(Duration grace) {
    Operation operation = current.get();
    if (operation != null && operation.started) {
      long earliest = System.nanoTime() + grace.toNanos();
      if (operation.deadline - earliest < 0) {
        operation.deadline = earliest;
      }
    }
  }

  @Override
  public void beforeExecution(PreparedStatement statement, StatementContext context) {
    // the context closes whether the statement succeeded or failed
    context.addCleanable(watch(statement)::done);
  }

  /**
   * Watches a statement about to run, to its operation's deadline (the whole timeout outside an
   * operation); the caller ends the watch when the statement has ended.
   */
  OperationDeadlines.Watch watch(Statement statement) {
    Operation operation = current.get();
    if (operation == null) {
      return OperationDeadlines.watch(timeout, () -> CANCELLERS.execute(() -> cancel(statement)));
    }
    long now = System.nanoTime();
    if (!operation.started) {
      operation.started = true;
      operation.deadline = now + timeout.toNanos();
    }
    Duration left = Duration.ofNanos(Math.max(0, operation.deadline - now));
    return OperationDeadlines.watch(
        left,
        () -> {
          operation.timedOut = true;
          CANCELLERS.execute(() -> cancel(statement));
        });
  }

  private static void cancel(Statement statement) {
    try {
      statement.cancel();
    } catch (SQLException | RuntimeException e) {
      log.debug("Could not cancel a statement past its operation timeout", e);
    }
  }
}
