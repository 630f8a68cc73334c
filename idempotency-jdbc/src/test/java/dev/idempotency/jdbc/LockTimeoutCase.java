package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The case of {@code PostgresLockTimeoutTest} and {@code MariaDbLockTimeoutTest}: a store built
 * with {@code operationTimeout(1 s)} ({@code docs/stores.md}: "bounds each store operation once it
 * has a connection") claims a new key while another transaction holds a lock on the whole table.
 * The claim must fail with {@link KeyStoreException} that says the timeout ended it, send nothing,
 * and do so within the timeout plus the watchdog's sweeps, the cancels' round trips and the short
 * read after a cancelled insert ({@code JdbcClaims.READ_AFTER_CANCEL}): {@value #BOUND_MILLIS} ms
 * here, not a multiple of the timeout. Before the fix each statement had a timeout of its own: the
 * insert's, then the read's, about 2.1 to 2.5 s.
 */
final class LockTimeoutCase {

  private static final Logger log = LoggerFactory.getLogger(LockTimeoutCase.class);

  static final Duration TIMEOUT = Duration.ofSeconds(1);

  /**
   * One timeout, plus at most two sweeps of the watchdog (50 ms each), the read's {@code
   * JdbcClaims.READ_AFTER_CANCEL} (0.1 s) and two cancels' round trips (PostgreSQL forks a process
   * for each): 1.2 to 1.5 s measured on a busy 2-core machine. Before the fix the claim waited two
   * whole timeouts, never less than 2 s (2.1 to 2.5 s measured).
   */
  static final long BOUND_MILLIS = 1_900;

  private LockTimeoutCase() {}

  static void claimOnALockedTableFailsWithinTheTimeout(
      DataSource pool, String table, String lockSql, String unlockSql, String database)
      throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(table)
            .createSchemaIfMissing(true)
            .operationTimeout(TIMEOUT)
            .build();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build()) {
      // the table exists and the pool is warm before the lock
      assertThat(guard.execute("warm:" + UUID.randomUUID(), Duration.ofHours(1), ctx -> "x"))
          .isEqualTo("x");
      AtomicInteger sends = new AtomicInteger();
      long[] millis = new long[3];
      Throwable[] failures = new Throwable[3];
      try (Connection holder = pool.getConnection()) {
        holder.setAutoCommit(false);
        execute(holder, lockSql);
        for (int round = 0; round < millis.length; round++) {
          long start = System.nanoTime();
          failures[round] =
              catchThrowable(
                  () ->
                      guard.execute(
                          "locked:" + UUID.randomUUID(),
                          Duration.ofHours(1),
                          ctx -> "sent " + sends.incrementAndGet()));
          millis[round] = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        }
        holder.rollback();
        if (unlockSql != null) {
          execute(holder, unlockSql);
        }
      }
      log.info(
          "{}: a claim on a locked table with operationTimeout {} ms failed after {} ms ({})",
          database,
          TIMEOUT.toMillis(),
          java.util.Arrays.toString(millis),
          failures[0]);
      assertThat(sends).as("nothing sent while the store failed").hasValue(0);
      for (int round = 0; round < millis.length; round++) {
        assertThat(failures[round]).isInstanceOf(KeyStoreException.class);
        assertThat(millis[round])
            .as(
                "%s: claim %s failed after %s ms with operationTimeout %s ms (%s)",
                database, round, millis[round], TIMEOUT.toMillis(), failures[round])
            .isLessThan(BOUND_MILLIS);
      }
      // the first claim reached the store (the guard refuses the next ones at once, as during any
      // outage): its error names the cause
      assertThat(failures[0]).hasMessageContaining("ran past its operationTimeout of 1000 ms");
    }
  }

  static void execute(Connection connection, String sql) throws SQLException {
    try (Statement statement = connection.createStatement()) {
      statement.execute(sql);
    }
  }
}
