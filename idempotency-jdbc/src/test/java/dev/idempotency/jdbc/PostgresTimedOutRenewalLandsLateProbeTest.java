package dev.idempotency.jdbc;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TimedOutRenewalLandsLateContract;

/**
 * probeF (SPEC 1): {@code DynamoDbTimedOutRenewalLandsLateProbeTest} on PostgreSQL (embedded), the
 * JDBC store on the guard's clock (its default): {@code extend} sets {@code lease_until = :now +
 * lease} from the request's time, fenced by the owner token only, so the keeper's renewal the
 * client gave up on, landing after the newer renewal of {@code leaseHeld()}, moves the row's lease
 * back. The late request is delivered by the test from the store's own pool, as a statement the
 * server ran after its client had failed (a dropped connection whose statement still ran); see the
 * DynamoDB test for the timeline.
 *
 * <p>CONFIRMED on probeF (150c8df), 2.2 s: "sends (the keeper's timed-out renewal landed late:
 * [true]; B got: b-2; A got: a-sent) expected: 1 but was: 2". Severity medium, as on DynamoDB
 * (needs a renewal landing after a newer one and the renewals after it failing); with {@code
 * databaseTime(true)} the late request sets the lease from the database's clock, later, and does no
 * harm.
 *
 * <p>FIXED on fixlease: {@code extend} (and PostgreSQL's batch renewal) sets {@code lease_until =
 * GREATEST(lease_until, :now + lease)}, so the late request leaves the newer lease, and answers
 * renewed (the row is still the owner's).
 *
 * <p>The case is {@link TimedOutRenewalLandsLateContract} (the store TCK).
 */
class PostgresTimedOutRenewalLandsLateProbeTest extends TimedOutRenewalLandsLateContract {

  private HikariDataSource pool;

  @Override
  protected KeyStore newStore() {
    pool = SharedPostgres.pool("late_renewal", 6);
    return JdbcKeyStore.builder(pool)
        .tableName("idem_late_renewal")
        .createSchemaIfMissing(true)
        .build();
  }

  @Override
  protected void closeStore(KeyStore store) {
    pool.close();
  }
}
