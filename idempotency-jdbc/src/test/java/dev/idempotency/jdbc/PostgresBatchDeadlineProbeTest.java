package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Probe (probe47): {@link BatchDeadlineProbeCase} on a real PostgreSQL 17 (insert-if-absent first,
 * then a select of the keys it did not insert, then the takeover of the lapsed key).
 */
@Tag("open-finding")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresBatchDeadlineProbeTest {

  private EmbeddedPostgres postgres;
  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
    pool = Pools.of(postgres.getJdbcUrl("postgres", "postgres"), 4);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
    if (postgres != null) {
      postgres.close();
    }
  }

  @Test
  void aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld() throws Exception {
    // a fixed test table name: no user input reaches this SQL
    BatchDeadlineProbeCase.aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
        pool, "batch_deadline_pg", "PostgreSQL");
  }
}
