package dev.idempotency.tck;

import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;

/**
 * A {@link KeyStore} that forwards every call to a real one, for tests that watch or slow down a
 * few of them: override those. Batch calls go through the single-key ones (the SPI's defaults).
 * {@link #takeBack} goes to the real store's own take-back, not through {@link #release}: a test
 * that watches the releases of unsent claims overrides it too.
 */
public abstract class ForwardingKeyStore implements KeyStore {

  /** The real store. */
  protected final KeyStore delegate;

  protected ForwardingKeyStore(KeyStore delegate) {
    this.delegate = delegate;
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    return delegate.claim(request);
  }

  @Override
  public boolean complete(CompleteRequest request) {
    return delegate.complete(request);
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    return delegate.release(keyId, ownerToken);
  }

  @Override
  public boolean takeBack(String keyId, String ownerToken, java.time.Instant now) {
    return delegate.takeBack(keyId, ownerToken, now);
  }

  @Override
  public boolean extend(ExtendRequest request) {
    return delegate.extend(request);
  }

  @Override
  public java.util.Optional<dev.idempotency.spi.StoredRecord> find(
      String keyId, java.time.Instant now) {
    return delegate.find(keyId, now);
  }

  @Override
  public boolean delete(String keyId, java.time.Instant now) {
    return delegate.delete(keyId, now);
  }

  @Override
  public int maxBatchSize() {
    return delegate.maxBatchSize();
  }

  @Override
  public int maxPayloadBytes() {
    return delegate.maxPayloadBytes();
  }

  @Override
  public boolean usesServerTime() {
    return delegate.usesServerTime();
  }
}
