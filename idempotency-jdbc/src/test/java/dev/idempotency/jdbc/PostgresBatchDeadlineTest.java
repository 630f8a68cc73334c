package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@link BatchDeadlineCase} on a real PostgreSQL 17 (insert-if-absent first, then a select of the
 * keys it did not insert, then the takeovers of the lapsed keys).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresBatchDeadlineTest {

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
    BatchDeadlineCase.aBatchThatTheDeadlineEndsAfterItsInsertLeavesNoKeyHeld(
        pool, "batch_deadline_pg", "PostgreSQL");
  }
}
