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
 * The probe of {@code PostgresLockTimeoutProbeTest} and {@code MariaDbLockTimeoutProbeTest}: a
 * store built with {@code operationTimeout(1 s)} ({@code docs/stores.md}: "bounds each store
 * operation once it has a connection") claims a new key while another transaction holds a lock on
 * the whole table. The claim must fail with {@link KeyStoreException}, send nothing, and do so
 * within the timeout plus the watchdog's sweep and the cancel's round trip (1.5 s here), not a
 * multiple of it.
 */
final class LockTimeoutProbe {

  private static final Logger log = LoggerFactory.getLogger(LockTimeoutProbe.class);

  static final Duration TIMEOUT = Duration.ofSeconds(1);
  static final long BOUND_MILLIS = 1_500;

  private LockTimeoutProbe() {}

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
    }
  }

  static void execute(Connection connection, String sql) throws SQLException {
    try (Statement statement = connection.createStatement()) {
      statement.execute(sql);
    }
  }
}
