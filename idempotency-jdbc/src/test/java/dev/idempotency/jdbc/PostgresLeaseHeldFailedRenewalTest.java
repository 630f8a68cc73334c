package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseHeldFailedRenewalContract;

/**
 * probeJ (SPEC 1, no lost send) on PostgreSQL (embedded; the JDBC store on the guard's clock): a
 * renewal the store fails before a send is tried once more, and a sender told by {@code
 * SendContext.leaseHeld()} that the lease is not held, which sends nothing and returns, does not
 * have its result recorded: the key is taken back and the retry sends once. In memory this is
 * {@code dev.idempotency.LeaseHeldAfterFailedRenewalProbeTest}, which failed before the fix.
 *
 * <p>The cases are {@link LeaseHeldFailedRenewalContract} (the store test kit).
 */
class PostgresLeaseHeldFailedRenewalTest extends LeaseHeldFailedRenewalContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("lease_held_failed", 6);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_lease_held_failed")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }
}
