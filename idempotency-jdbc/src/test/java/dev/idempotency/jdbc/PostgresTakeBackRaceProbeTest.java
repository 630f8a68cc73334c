package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * probeL: the take-back's two statements (delete of a first attempt, lapseTakeover) raced by
 * renewals, completions and third callers' claims, each on its own pooled connection, on a real
 * PostgreSQL.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresTakeBackRaceProbeTest extends TakeBackRaceProbe {

  private HikariDataSource pool;
  private JdbcKeyStore store;

  @BeforeAll
  void start() {
    pool = SharedPostgres.pool("takeback_race", 3 * KEYS + 4);
    store = JdbcKeyStore.builder(pool).tableName("idem_race").createSchemaIfMissing(true).build();
  }

  @AfterAll
  void stop() {
    if (pool != null) {
      pool.close();
    }
  }

  @Override
  protected KeyStore store() {
    return store;
  }
}
