package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchRecordRacingLoopsContract;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1, in memory: 16 send loops racing {@link Batch#record()}
 * send every key exactly once once repeated. The case is {@link BatchRecordRacingLoopsContract}
 * (the store test kit), also run on PostgreSQL ({@code PostgresBatchRecordRacingLoopsTest}).
 */
class BatchRecordRacingLoopsProbeTest extends BatchRecordRacingLoopsContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
