package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchConcurrentHandOutFailedRenewalContract;

/**
 * probeT (SPEC 1): {@code dev.idempotency.BatchConcurrentHandOutFailedRenewalProbeTest} (probeO's,
 * fixed by 123d5c2) on PostgreSQL 17 (embedded; the JDBC store on the guard's clock), as {@code
 * H2BatchConcurrentHandOutFailedRenewalProbeTest} is on H2: thread 1's hand-out renewal of keys a
 * and y, which counted a as not handed out, is held and then fails (the store did not answer);
 * meanwhile thread 2, after a 1 s clock step back, hands a out. The failure must not mark a lost:
 * the keeper goes on renewing it while its send runs, and guard B, asking after a's first lease
 * would have run out, finds it in progress. Lease 8 s, the guard's clock moved by hand.
 *
 * <p>probeT: fails with 123d5c2's LeaseKeeper change taken out (a failed renewal losing every claim
 * of its chunk): "[a sent once (B got: b-2)] Expecting AtomicInteger(2) to have value: 1"; passes
 * with it.
 *
 * <p>The case is {@link BatchConcurrentHandOutFailedRenewalContract} (the store test kit).
 */
class PostgresBatchConcurrentHandOutFailedRenewalProbeTest
    extends BatchConcurrentHandOutFailedRenewalContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("probet_concurrent", 6);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_probet_concurrent")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }

  @Override
  protected String name() {
    return "postgres-";
  }
}
