package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@link BatchDeadlineCase} on H2 2.x in memory, which claims a batch key by key: the locked key is
 * reported in flight alone, and the others are claimed and sent. The URL sets H2's {@code
 * LOCK_TIMEOUT} to the store's 1 s operation timeout: with H2's default (2 s) the locked round took
 * 2,025 ms in one run, as the store's cancel did not end H2's lock wait.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class H2BatchDeadlineTest {

  private HikariDataSource pool;

  @BeforeAll
  void startH2() {
    pool =
        Pools.of(
            "jdbc:h2:mem:batch-deadline-"
                + UUID.randomUUID()
                + ";DB_CLOSE_DELAY=-1;LOCK_TIMEOUT=1000",
            4);
  }

  @AfterAll
  void stopH2() {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld() throws Exception {
    // a fixed test table name: no user input reaches this SQL
    BatchDeadlineCase.aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
        pool, "batch_deadline_h2", "H2");
  }
}
