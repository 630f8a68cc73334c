package dev.idempotency.dynamodb;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.RenewNowRaceContract;
import dev.idempotency.testservers.Dynalite;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;

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
    DynamoDbKeyStore store =
        DynamoDbKeyStore.builder(DynaliteClients.client(Dynalite.shared().endpoint()))
            .tableName("idempotency-renew-now-race")
            .createTableIfMissing(true)
            .build();
    try {
      Poll.within(Duration.ofSeconds(60))
          .every(Duration.ofMillis(50))
          .ignoring(KeyStoreException.class)
          .until("the table answers", () -> store.find("warm", Instant.now()), found -> true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
    return store;
  }

  @Override
  protected void closeStore(KeyStore store) {
    ((DynamoDbKeyStore) store).close();
  }
}
