package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchRecordRacingLoopsContract;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1, on PostgreSQL (embedded): 16 send loops racing {@code
 * Batch.record()} send every key exactly once once repeated (3 rounds of 64 keys). In memory this
 * is {@code dev.idempotency.BatchRecordRacingLoopsProbeTest} (10 rounds).
 */
class PostgresBatchRecordRacingLoopsTest extends BatchRecordRacingLoopsContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("batch_record_loops", 10);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_batch_record_loops")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }

  @Override
  protected int rounds() {
    return 3;
  }
}
