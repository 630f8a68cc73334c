package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseHeldStickyFalseContract;

/**
 * probeM on 48264359, SPEC 1, on PostgreSQL (embedded; the JDBC store on the guard's clock): {@code
 * SendContext.leaseHeld()} answering {@code false} for good, attacked with two askers at once, a
 * store pause between asks and a batch item with renewal off. In memory this is {@code
 * dev.idempotency.LeaseHeldStickyFalseProbeTest}.
 *
 * <p>The cases are {@link LeaseHeldStickyFalseContract} (the store test kit).
 */
class PostgresLeaseHeldStickyFalseTest extends LeaseHeldStickyFalseContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("lease_held_sticky", 6);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_lease_held_sticky")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }
}
