package dev.idempotency.dynamodb;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.RenewNowRaceContract;

/**
 * probeB, suspicion 2, on DynamoDB (dynalite): the race of {@link RenewNowRaceContract}. The
 * store's extend sets the lease from the request's time ("an older one landing late moves it back",
 * DynamoDbTakeBack), so the keeper's renewal sent at T0 and landing after the batch's own renewal
 * at T0+2 s moved the item's lease back to T0+4 s while the guard believed T0+6 s and had handed
 * the key out; guard B claimed it at T0+4.5 s.
 *
 * <p>CONFIRMED on probeB: two sends ("Expected: 1, Actual: 2"). Severity medium (see the contract).
 * FIXED (fixcore).
 */
class DynamoDbRenewNowRaceProbeTest extends RenewNowRaceContract {

  @Override
  protected KeyStore newStore() {
    return DynaliteTables.answeringStore("idempotency-renew-now-race");
  }

  @Override
  protected void closeStore(KeyStore store) {
    ((DynamoDbKeyStore) store).close();
  }
}
