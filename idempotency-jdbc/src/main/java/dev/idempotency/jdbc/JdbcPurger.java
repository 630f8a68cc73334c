package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deletes a {@link JdbcKeyStore}'s rows past their window, in bounded batches, once or on a
 * schedule. Get one from {@link JdbcKeyStore#purger()}.
 *
 * <pre>{@code
 * store.purger().schedulePurge(scheduler, Duration.ofMinutes(10));
 * }</pre>
 *
 * <p>Rows past their window already count as absent to every claim, so purging bounds only the
 * table's size, never correctness. Safe to run from several instances at once: on PostgreSQL
 * concurrent purgers skip each other's rows, on MySQL/MariaDB a deadlock between them is retried.
 *
 * <p>Which rows are past their window is decided on the database's clock when the store uses it
 * ({@link JdbcKeyStore.Builder#databaseTime(boolean)}), otherwise on this purger's clock.
 * Thread-safe.
 */
public final class JdbcPurger {

  /**
   * The default number of rows one purge statement deletes: 5,000. On a 10-million-row PostgreSQL
   * table with 16 threads sending, that deleted 68,000 to 80,000 rows a second where 1,000-row
   * statements deleted 30,000 (each statement's commit is most of its cost), and the senders' p99
   * rose at most 1.5x (BENCHMARKS.md, run 14). The rows a statement deletes are locked until it
   * commits, tens of milliseconds: a claim of one of those expired keys waits that long.
   */
  public static final int DEFAULT_BATCH_SIZE = 5_000;

  private static final Logger log = LoggerFactory.getLogger(JdbcPurger.class);

  private final SqlExecutor executor;
  private final java.util.function.Supplier<Statements> sql;
  private final boolean databaseTime;
  private final String tableName;
  private final Clock clock;

  JdbcPurger(
      SqlExecutor executor,
      java.util.function.Supplier<Statements> sql,
      boolean databaseTime,
      String tableName,
      Clock clock) {
    this.executor = executor;
    this.sql = sql;
    this.databaseTime = databaseTime;
    this.tableName = tableName;
    this.clock = Objects.requireNonNull(clock, "clock must not be null");
  }

  /**
   * Deletes at most {@code limit} rows whose window has passed, in one statement.
   *
   * @param limit the most rows to delete, at least 1
   * @return how many rows were deleted
   * @throws KeyStoreException if the database failed
   */
  public int purgeExpired(int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be at least 1, was " + limit);
    }
    String statement = sql.get().purge();
    return executor.call(
        "purge",
        handle -> {
          var update = handle.createUpdate(statement).bind("limit", limit);
          if (!databaseTime) {
            update.bind("now", clock.millis());
          }
          return update.execute();
        });
  }

  /**
   * Deletes every row whose window has passed, in batches of {@code batchSize}, until a batch
   * deletes fewer.
   *
   * @param batchSize rows per statement, at least 1
   * @return how many rows were deleted in all
   * @throws KeyStoreException if the database failed
   */
  public long purgeAllExpired(int batchSize) {
    long total = 0;
    int deleted;
    do {
      deleted = purgeExpired(batchSize);
      total += deleted;
    } while (deleted == batchSize);
    return total;
  }

  /**
   * Runs {@link #purgeAllExpired(int)} every {@code interval} on the given executor, with {@link
   * #DEFAULT_BATCH_SIZE}-row batches. A failed run is logged and the schedule goes on. Every
   * instance of a service may schedule it. Cancel the returned future to stop.
   *
   * <p>A good interval is a fraction of the shortest window in use: every 5 to 15 minutes for
   * windows of hours.
   *
   * @param scheduler the executor that runs the purge
   * @param interval the time between runs, positive
   * @return the scheduled task
   */
  public ScheduledFuture<?> schedulePurge(ScheduledExecutorService scheduler, Duration interval) {
    Objects.requireNonNull(scheduler, "scheduler must not be null");
    Objects.requireNonNull(interval, "interval must not be null");
    if (interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("interval must be positive, was " + interval);
    }
    return scheduler.scheduleWithFixedDelay(
        () -> {
          try {
            long deleted = purgeAllExpired(DEFAULT_BATCH_SIZE);
            log.debug("Purged {} expired idempotency records from {}", deleted, tableName);
          } catch (RuntimeException e) {
            log.warn(
                "Purging expired idempotency records from {} failed; will retry", tableName, e);
          }
        },
        interval.toMillis(),
        interval.toMillis(),
        TimeUnit.MILLISECONDS);
  }
}
