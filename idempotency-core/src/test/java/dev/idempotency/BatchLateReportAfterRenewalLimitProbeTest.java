package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.BatchLateReportAfterRenewalLimitContract;

/**
 * probeO on fixfanout (dea09488), SPEC 1, in memory: a batch key's late report after {@code
 * record()}, the renewal limit and a takeover, or after the guard's close. The cases are {@link
 * BatchLateReportAfterRenewalLimitContract} (the store test kit), also run on PostgreSQL ({@code
 * PostgresBatchLateReportAfterRenewalLimitProbeTest}).
 */
class BatchLateReportAfterRenewalLimitProbeTest extends BatchLateReportAfterRenewalLimitContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
