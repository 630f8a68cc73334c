package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchesAbandonedRacingCloseContract;
import org.junit.jupiter.api.Tag;

/**
 * probeY (SPEC 1): {@link BatchesAbandonedRacingCloseContract} (the store test kit) on PostgreSQL
 * 17 (embedded, shared; the JDBC store on the guard's clock, moved by hand, lease 4 s): abandoned
 * batches on four threads report while the guard closes with a 20 ms grace; no sent key left in
 * progress, one send per key. 20 rounds; tagged extended for its length (about 17 s with the
 * server's start), its in-memory twin {@code BatchesAbandonedRacingCloseProbeTest} runs by default.
 */
@Tag("extended")
class PostgresBatchesAbandonedRacingCloseProbeTest extends BatchesAbandonedRacingCloseContract {

  private HikariDataSource pool;

  PostgresBatchesAbandonedRacingCloseProbeTest() {
    super("pg-", 20);
  }

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("probey_abandoned_close", 8);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_probey_abandoned_close")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }
}
