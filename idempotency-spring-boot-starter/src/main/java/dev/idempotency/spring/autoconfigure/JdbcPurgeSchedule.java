package dev.idempotency.spring.autoconfigure;

import dev.idempotency.jdbc.JdbcKeyStore;
import dev.idempotency.jdbc.JdbcPurger;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/**
 * Deletes JDBC rows past their window on a schedule ({@code idempotency.jdbc.purge.*}), on one
 * daemon thread of its own, while the application runs.
 *
 * <p>Each run deletes in statements of at most {@code batch-size} rows until fewer are left, so no
 * statement holds many locks or a long transaction. Every instance of a service runs it: concurrent
 * purges skip each other's rows (PostgreSQL) or retry a deadlock (MySQL/MariaDB), and the first run
 * comes at a random point within one interval so that instances started together spread out. A
 * failed run (the database down, or an {@code Error} such as a driver class that fails to load)
 * logs one WARN line per streak of failed runs, with the stack trace at DEBUG, and the next run
 * tries again: no failure ends the schedule. A run that follows a failed one and succeeds logs that
 * the purge works again. Which rows have expired is decided on the database's clock when the store
 * uses it.
 */
public final class JdbcPurgeSchedule implements SmartLifecycle {

  private static final Logger log = LoggerFactory.getLogger(JdbcPurgeSchedule.class);

  private final Supplier<@Nullable JdbcKeyStore> store;
  private final Duration interval;
  private final int batchSize;
  private final AtomicLong purged = new AtomicLong();
  private final AtomicLong runs = new AtomicLong();
  private volatile @Nullable ScheduledExecutorService scheduler;
  private volatile boolean failing;

  /**
   * Creates the schedule.
   *
   * @param store the store whose rows to purge, looked up at start; a supplier of {@code null} (the
   *     store is not JDBC) schedules nothing
   * @param settings the interval and the batch size
   * @throws IllegalArgumentException if the interval is not positive or the batch size below 1
   */
  public JdbcPurgeSchedule(
      Supplier<@Nullable JdbcKeyStore> store, IdempotencyProperties.Purge settings) {
    this.store = Objects.requireNonNull(store, "store must not be null");
    this.interval = settings.getInterval();
    this.batchSize = settings.getBatchSize();
    if (interval == null || interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException(
          "idempotency.jdbc.purge.interval must be positive, was " + interval);
    }
    if (batchSize < 1) {
      throw new IllegalArgumentException(
          "idempotency.jdbc.purge.batch-size must be at least 1, was " + batchSize);
    }
  }

  @Override
  public synchronized void start() {
    if (scheduler != null) {
      return;
    }
    JdbcKeyStore jdbc = store.get();
    if (jdbc == null) {
      return;
    }
    JdbcPurger purger = jdbc.purger();
    ScheduledExecutorService started =
        Executors.newSingleThreadScheduledExecutor(
            task -> {
              Thread thread = new Thread(task, "idempotency-jdbc-purge");
              thread.setDaemon(true);
              return thread;
            });
    long periodMillis = interval.toMillis();
    long firstMillis = ThreadLocalRandom.current().nextLong(Math.max(1, periodMillis));
    started.scheduleWithFixedDelay(
        () -> run(purger, jdbc.tableName()), firstMillis, periodMillis, TimeUnit.MILLISECONDS);
    scheduler = started;
    log.debug(
        "Purging expired idempotency records from {} every {} in batches of {}",
        jdbc.tableName(),
        interval,
        batchSize);
  }

  private void run(JdbcPurger purger, String table) {
    try {
      long deleted = purger.purgeAllExpired(batchSize);
      purged.addAndGet(deleted);
      runs.incrementAndGet();
      if (failing) {
        failing = false;
        log.info("Purging expired idempotency records from {} works again", table);
      }
      log.debug("Purged {} expired idempotency records from {}", deleted, table);
    } catch (RuntimeException e) {
      failed(table, e.getMessage(), e);
    } catch (Error e) {
      // An Error must not end the schedule either: scheduleWithFixedDelay runs no further run once
      // one throws, and keeps the throwable in a future nobody reads, so the purge would stop for
      // the life of the application without a word and the table grow without bound. That holds
      // for a VirtualMachineError too (an OutOfMemoryError, a StackOverflowError in a driver):
      // thrown from here it reaches no handler and kills nothing but the purge, so it is logged
      // and the next run tries again, as Spring's TaskUtils.LOG_AND_SUPPRESS_ERROR_HANDLER does. An
      // application that must die on OutOfMemoryError says so to the JVM
      // (-XX:+ExitOnOutOfMemoryError), which acts before this catch.
      failed(table, e.toString(), e);
    }
  }

  /** A run failed: one WARN per streak of failed runs (no keys in it), the next run tries again. */
  private void failed(String table, @Nullable String why, Throwable e) {
    if (!failing) {
      failing = true;
      log.warn(
          "Purging expired idempotency records from {} failed ({}); retrying every {}",
          table,
          why,
          interval);
    }
    log.debug("The purge's failure", e);
  }

  @Override
  public synchronized void stop() {
    ScheduledExecutorService running = scheduler;
    if (running != null) {
      scheduler = null;
      running.shutdownNow();
    }
  }

  @Override
  public boolean isRunning() {
    return scheduler != null;
  }

  /**
   * How many rows the schedule has deleted since the application started.
   *
   * @return the rows deleted
   */
  public long purgedRows() {
    return purged.get();
  }

  /**
   * How many runs have completed without failing since the application started.
   *
   * @return the completed runs
   */
  public long completedRuns() {
    return runs.get();
  }
}
