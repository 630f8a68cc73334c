package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Issue 37: {@code operationTimeout(1 s)} on a real PostgreSQL 17 whose store table is locked
 * ({@code LOCK TABLE ... IN ACCESS EXCLUSIVE MODE} in another open transaction), see {@link
 * LockTimeoutCase}; and a batch claim that fails on a locked row after its insert committed, see
 * {@link BatchDeadlineCase} (insert-if-absent first, then a select of the keys it did not insert,
 * then the takeovers of the lapsed keys).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresLockTimeoutTest {

  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("lock_timeout", 4);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void aClaimOnALockedTableFailsWithinItsOperationTimeout() throws Exception {
    LockTimeoutCase.claimOnALockedTableFailsWithinTheTimeout(
        pool,
        "locked_pg",
        // a fixed test table name: no user input reaches this SQL
        "LOCK TABLE locked_pg IN ACCESS EXCLUSIVE MODE",
        null,
        "PostgreSQL");
  }

  @Test
  void aBatchThatFailsAfterItsInsertLeavesNoKeyHeld() throws Exception {
    // a fixed test table name: no user input reaches this SQL
    BatchDeadlineCase.aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
        pool, "batch_deadline_pg", "PostgreSQL");
  }
}
