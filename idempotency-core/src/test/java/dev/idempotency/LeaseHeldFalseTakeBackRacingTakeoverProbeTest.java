package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseHeldTakeBackRacingTakeoverContract;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1, in memory: the take-back after {@link
 * SendContext#leaseHeld()} answered {@code false} and the sender returned normally leaves another
 * guard's takeover, mid-send, alone. The case is {@link LeaseHeldTakeBackRacingTakeoverContract}
 * (the store test kit), also run on PostgreSQL ({@code
 * PostgresLeaseHeldTakeBackRacingTakeoverTest}).
 */
class LeaseHeldFalseTakeBackRacingTakeoverProbeTest
    extends LeaseHeldTakeBackRacingTakeoverContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
