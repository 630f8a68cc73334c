package dev.idempotency.spring.messaging;

import dev.idempotency.KeyStoreException;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The application's store in the messaging tests: the real in-memory store, which a test can make
 * fail as a stopped server does.
 */
public final class SwitchableKeyStore implements KeyStore {

  public final AtomicBoolean down = new AtomicBoolean();

  /** How often a claim reached the store (one per key of a batch), counted while up or down. */
  public final java.util.concurrent.atomic.AtomicInteger claims =
      new java.util.concurrent.atomic.AtomicInteger();

  private final KeyStore delegate = InMemoryKeyStore.builder().build();

  private void check() {
    if (down.get()) {
      throw new KeyStoreException("the store is down (test)", null);
    }
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    claims.incrementAndGet();
    check();
    return delegate.claim(request);
  }

  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    claims.addAndGet(requests.size());
    check();
    return delegate.claimAll(requests);
  }

  @Override
  public boolean complete(CompleteRequest request) {
    check();
    return delegate.complete(request);
  }

  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    check();
    return delegate.completeAll(requests);
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    check();
    return delegate.release(keyId, ownerToken);
  }

  @Override
  public boolean extend(ExtendRequest request) {
    check();
    return delegate.extend(request);
  }

  @Override
  public int maxBatchSize() {
    return delegate.maxBatchSize();
  }
}
