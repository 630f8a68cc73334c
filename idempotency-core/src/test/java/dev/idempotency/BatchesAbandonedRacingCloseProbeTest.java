package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchesAbandonedRacingCloseContract;

/**
 * probeY (SPEC 1): {@link BatchesAbandonedRacingCloseContract} (the store test kit) on the
 * in-memory store: abandoned batches on four threads send and report their keys while another
 * thread closes the guard with a 20 ms grace; no key handed out after the close, every key reported
 * sent COMPLETED at once, one send per key. The guards' clock moved by hand (lease 4 s); 60 rounds,
 * a few seconds on a busy machine. Runs by default; its PostgreSQL and Redis twins are tagged
 * extended.
 */
class BatchesAbandonedRacingCloseProbeTest extends BatchesAbandonedRacingCloseContract {

  BatchesAbandonedRacingCloseProbeTest() {
    super("", 60);
  }

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
