package dev.idempotency.inmemory;

import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.TimedOutRenewalLandsLateContract;

/**
 * probeJ: {@link TimedOutRenewalLandsLateContract} on the in-memory store: the keeper's renewal the
 * client gave up on, landing after a newer one, keeps the later lease deadline and answers renewed.
 * Ran on PostgreSQL and DynamoDB only before.
 */
class InMemoryTimedOutRenewalLandsLateTest extends TimedOutRenewalLandsLateContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
