package dev.idempotency.jdbc;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.RenewNowRaceContract;
import java.util.UUID;
import org.h2.jdbcx.JdbcDataSource;

/**
 * probeB, suspicion 2, on H2 (a real database; the JDBC store on the guard's clock, its default):
 * the race of {@link RenewNowRaceContract}. JDBC's extend sets {@code lease_until = :now + lease}
 * from the request's time, so the keeper's renewal sent at T0 and landing after the batch's own
 * renewal at T0+2 s moved the row's lease back to T0+4 s while the guard believed T0+6 s and had
 * handed the key out; guard B claimed it at T0+4.5 s.
 *
 * <p>CONFIRMED on probeB: B took the key over and sent while A's handed-out send was live: two
 * sends ("Expected: 1, Actual: 2"). Severity medium (see the contract). FIXED (fixcore).
 */
class H2RenewNowRaceProbeTest extends RenewNowRaceContract {

  @Override
  protected KeyStore newStore() {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:renew-now-race-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
    return JdbcKeyStore.builder(h2).tableName("renew_now_race").createSchemaIfMissing(true).build();
  }
}
