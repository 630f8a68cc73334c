package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseHeldStickyFalseContract;

/**
 * probeM on 48264359, SPEC 1, in memory: {@link SendContext#leaseHeld()} answering {@code false}
 * for good, attacked with two askers at once, a store pause between asks and a batch item with
 * renewal off. The cases are {@link LeaseHeldStickyFalseContract} (the store test kit), also run on
 * PostgreSQL ({@code PostgresLeaseHeldStickyFalseTest}).
 */
class LeaseHeldStickyFalseProbeTest extends LeaseHeldStickyFalseContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
