package dev.idempotency.jdbc;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TimedOutRenewalLandsLateContract;
import java.util.UUID;
import org.h2.jdbcx.JdbcDataSource;

/**
 * probeJ: {@link TimedOutRenewalLandsLateContract} on H2 (in memory), the JDBC store on the guard's
 * clock: the keeper's renewal the client gave up on, landing after a newer one, leaves the newer
 * lease ({@code GREATEST}) and answers renewed. Ran on PostgreSQL and DynamoDB only before.
 */
class H2TimedOutRenewalLandsLateTest extends TimedOutRenewalLandsLateContract {

  @Override
  protected KeyStore newStore() {
    JdbcDataSource dataSource = new JdbcDataSource();
    dataSource.setURL(
        "jdbc:h2:mem:late_" + UUID.randomUUID().toString().replace("-", "") + ";DB_CLOSE_DELAY=-1");
    return JdbcKeyStore.builder(dataSource)
        .tableName("idem_late_renewal")
        .createSchemaIfMissing(true)
        .build();
  }
}
