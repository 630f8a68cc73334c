package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@link BatchDeadlineProbeCase} on H2 2.x in memory, which claims a batch key by key: the locked
 * key fails alone, and the others are claimed and sent.
 */
@Tag("open-finding")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class H2BatchDeadlineProbeTest {

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
    BatchDeadlineProbeCase.aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
        pool, "batch_deadline_h2", "H2");
  }
}
