package dev.idempotency.dynamodb;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TimedOutRenewalLandsLateContract;

/**
 * probeF (SPEC 1): the fix of 1ef3b83 keeps a claim's renewals from overlapping on the client: a
 * {@code renewNow} waits for the keeper's renewal until the store call returns. A call that returns
 * because the client gave up (the SDK's operation timeout, 2 s by default) does not take its
 * request back: DynamoDB applies a request it received whatever happened to the connection. {@code
 * extend} sets {@code lease_until} to the request's own time plus the lease, fenced by the owner
 * token only, so the timed-out keeper renewal landing after the newer renewal moves the stored
 * lease back behind the guard's estimate, as before the fix.
 *
 * <p>dynalite; guard A's store passes every request on except the keeper's, which the test takes as
 * "sent, and the client timed out" (a {@link KeyStoreException} to the keeper) and delivers to
 * dynalite later, from a second client, as the network would. Lease 4 s, clocks moved by hand: A
 * claims at T0; the keeper's renewal (request time T0) times out; at T0+3.5 s A's async sender asks
 * {@code leaseHeld()}, which renews (T0+7.5 s, guard and store) and the provider call starts; then
 * the keeper's request lands (T0+4 s); the keeper's later renewals keep timing out; at T0+5 s guard
 * B claims the key, with A's lease live by A's estimate until T0+7.5 s.
 *
 * <p>CONFIRMED on probeF (a9525f9), 1.1 s: "sends (the keeper's timed-out renewal landed late:
 * [true]; B got: b-2; A got: a-sent) expected: 1 but was: 2". Severity medium: it needs a renewal
 * request delayed past the client's operation timeout and past a newer renewal, then further
 * renewals failing until the moved-back lease ends (with later renewals landing, the next keeper
 * round, a quarter lease after the newer one, moves it forward again in time); the guard's lease
 * estimate is then wrong by up to three quarters of a lease, outside the documented lease-lapse
 * case (renewals failing for longer than the lease). Same shape on any store that sets the lease
 * from the client's request time (JDBC without database time); Redis takes the server's time, so a
 * late request moves its lease forward.
 *
 * <p>FIXED on fixlease: {@code extend}'s conditions also require {@code lease_until <= :lease}, so
 * the late request changes nothing; the item read back after both conditions fail (still the
 * owner's, in progress, leased further) makes it answer renewed, not lost.
 *
 * <p>The case is {@link TimedOutRenewalLandsLateContract} (the store TCK), shared with {@code
 * PostgresTimedOutRenewalLandsLateProbeTest}.
 */
class DynamoDbTimedOutRenewalLandsLateProbeTest extends TimedOutRenewalLandsLateContract {

  @Override
  protected KeyStore newStore() {
    return DynaliteTables.answeringStore("idempotency-late-renewal");
  }

  @Override
  protected void closeStore(KeyStore store) {
    ((DynamoDbKeyStore) store).close();
  }
}
