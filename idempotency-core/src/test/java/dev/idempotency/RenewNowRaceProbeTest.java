package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.RenewNowRaceContract;

/**
 * probeB, suspicion 2 (SPEC 1), on the in-memory store (a real store): a batch's renewal before a
 * hand-out ({@code LeaseKeeper.renewNow}) racing the keeper's own renewal of the same claim; the
 * case, what probeB confirmed and the fix it guards (fixcore) are described in {@link
 * RenewNowRaceContract}.
 */
class RenewNowRaceProbeTest extends RenewNowRaceContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
