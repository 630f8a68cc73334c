package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Issue 37 (found by probeF): {@code docs/stores.md} ("Bounded time") says {@code operationTimeout}
 * bounds each store operation once it has a connection, and that "a row lock held by a stuck
 * transaction then fails the claim" after that timeout; {@code docs/outbox.md} says a usual-mode
 * claim that meets a locked row is reported in flight, its wait exceeding {@code inFlightWait} by
 * at most one {@code operationTimeout}. On H2 the store's cancel does not end a row-lock wait (H2
 * 2.x waits in {@code Transaction.waitFor} for its own {@code LOCK_TIMEOUT}, which the usual mode
 * never sets), so a usual-mode takeover of a lapsed key whose row another transaction holds ({@code
 * SELECT ... FOR UPDATE}) waits H2's {@code LOCK_TIMEOUT} (here 6 s, as an application may set in
 * its URL), not the store's 0.5 s. Nothing is sent, so no duplicate: a caller blocked far longer
 * than documented. Fixed: on H2 each store operation lowers the session's {@code LOCK_TIMEOUT} to
 * the operation timeout and restores it after ({@code LockWaitBound}); it failed before (12 s).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class H2RowLockOperationTimeoutTest {

  private static final Logger log = LoggerFactory.getLogger(H2RowLockOperationTimeoutTest.class);

  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration OPERATION_TIMEOUT = Duration.ofMillis(500);
  private static final Duration IN_FLIGHT_WAIT = Duration.ofMillis(200);

  /**
   * The documented bound: inFlightWait plus one operationTimeout for the first claim and one for
   * the claim after the wait (outbox.md), plus a second for sweeps, cancels and a busy machine.
   */
  private static final long BOUND_MILLIS = 2_700;

  private HikariDataSource pool;

  @BeforeAll
  void startH2() {
    pool =
        Pools.of(
            "jdbc:h2:mem:rowlock-probe-"
                + UUID.randomUUID()
                + ";DB_CLOSE_DELAY=-1;LOCK_TIMEOUT=6000",
            4);
  }

  @AfterAll
  void stopH2() {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void aTakeoverOfALockedRowIsBoundedByTheOperationTimeout() throws Exception {
    String table = "rowlock_probe_h2"; // a fixed test table name: no user input reaches this SQL
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(table)
            .createSchemaIfMissing(true)
            .operationTimeout(OPERATION_TIMEOUT)
            .build();
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).inFlightWait(IN_FLIGHT_WAIT).build()) {
      String key = "locked:" + UUID.randomUUID();
      // a sender that "crashed": its row stays IN_PROGRESS under a token nobody holds, lapsed
      guard.execute(
          key,
          TTL,
          ctx -> {
            try (Connection c = pool.getConnection();
                Statement s = c.createStatement()) {
              s.execute(
                  "UPDATE "
                      + table
                      + " SET owner_token = 'crashed', lease_until = 1 WHERE state = 'IN_PROGRESS'");
            }
            return "crashed";
          });
      AtomicInteger sends = new AtomicInteger();
      long millis;
      Throwable failure;
      try (Connection holder = pool.getConnection()) {
        holder.setAutoCommit(false);
        try (PreparedStatement lock =
            holder.prepareStatement(
                "SELECT key_id FROM " + table + " WHERE owner_token = ? FOR UPDATE")) {
          lock.setString(1, "crashed");
          lock.executeQuery().close();
        }
        long start = System.nanoTime();
        failure =
            catchThrowable(() -> guard.execute(key, TTL, ctx -> "sent " + sends.incrementAndGet()));
        millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        holder.rollback();
      }
      log.info("H2: a takeover of a locked row answered after {} ms with {}", millis, "" + failure);
      assertThat(sends).as("nothing sent while the row was locked").hasValue(0);
      assertThat(failure)
          .as("a locked row is a call in flight")
          .isInstanceOf(IdempotencyInProgressException.class);
      assertThat(millis)
          .as(
              "answered after %s ms with operationTimeout %s ms, inFlightWait %s ms (%s)",
              millis, OPERATION_TIMEOUT.toMillis(), IN_FLIGHT_WAIT.toMillis(), failure)
          .isLessThan(BOUND_MILLIS);
    }
  }
}
