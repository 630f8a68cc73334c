package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchLateReportAfterRenewalLimitContract;

/**
 * probeO on fixfanout (dea09488), SPEC 1, on PostgreSQL (embedded): a batch key's late report after
 * {@code record()}, the renewal limit and a takeover, or after the guard's close. In memory this is
 * {@code dev.idempotency.BatchLateReportAfterRenewalLimitProbeTest}; the cases are {@link
 * BatchLateReportAfterRenewalLimitContract} (the store test kit).
 */
class PostgresBatchLateReportAfterRenewalLimitProbeTest
    extends BatchLateReportAfterRenewalLimitContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("batch_late_report", 6);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_batch_late_report")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }
}
