package dev.idempotency;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseHeldFailedRenewalContract;

/**
 * probeJ (SPEC 1, no lost send), in memory: {@link SendContext#leaseHeld()} renews a claim that is
 * due, and a renewal the store failed (not refused) marked the claim lost, so it answered {@code
 * false} although the record was still this call's. A sender that then "sent nothing" as the
 * Javadoc says and returned normally had its result recorded as the key's outcome: every repeat
 * replayed it and the message never went out.
 *
 * <p>Was an open finding (medium: a lost send for a sender that follows the Javadoc; one failed
 * renewal was enough): "[the message went out once (first: not sent, repeat: not sent)] Expecting
 * AtomicInteger(0) to have value: 1". Fixed on fixlease: a failed renewal before a send is tried
 * once more, and a normal return after {@code leaseHeld()} answered {@code false} is not recorded
 * (the key is taken back, the caller gets a {@link KeyStoreException}, the retry sends once).
 *
 * <p>The cases are {@link LeaseHeldFailedRenewalContract} (the store test kit), also run on
 * PostgreSQL ({@code PostgresLeaseHeldFailedRenewalTest}).
 */
class LeaseHeldAfterFailedRenewalProbeTest extends LeaseHeldFailedRenewalContract {

  @Override
  protected KeyStore newStore() {
    return InMemoryKeyStore.builder().build();
  }
}
