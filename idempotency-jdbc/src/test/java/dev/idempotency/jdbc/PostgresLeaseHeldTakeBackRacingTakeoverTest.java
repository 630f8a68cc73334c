package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseHeldTakeBackRacingTakeoverContract;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1, on PostgreSQL (embedded; the JDBC store on the guard's
 * clock): the fenced take-back after {@code SendContext.leaseHeld()} answered {@code false} and the
 * sender returned normally leaves another guard's takeover, mid-send, alone; repeats replay its
 * outcome. In memory this is {@code dev.idempotency.LeaseHeldFalseTakeBackRacingTakeoverProbeTest}.
 */
class PostgresLeaseHeldTakeBackRacingTakeoverTest extends LeaseHeldTakeBackRacingTakeoverContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("take_back_vs_takeover", 6);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_take_back_vs_takeover")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }
}
