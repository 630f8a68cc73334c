package dev.idempotency.inmemory;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TakeBackRaceProbe;

/** probeL: the in-memory take-back raced by renewals, completions and third callers. */
class InMemoryTakeBackRaceProbeTest extends TakeBackRaceProbe {

  private final InMemoryKeyStore store = InMemoryKeyStore.builder().build();

  @Override
  protected KeyStore store() {
    return store;
  }
}
