package dev.idempotency.tck;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Wraps a real store to count its calls, remember claim requests, and inject store failures on
 * demand. Not a mock: every call that is not failed reaches the real store.
 */
public final class ObservedKeyStore extends ForwardingKeyStore {

  public final AtomicInteger claims = new AtomicInteger();
  public final AtomicInteger completes = new AtomicInteger();
  public final AtomicInteger releases = new AtomicInteger();
  public final AtomicInteger extensions = new AtomicInteger();
  public final AtomicInteger inFlightSeen = new AtomicInteger();
  public final AtomicInteger failClaims = new AtomicInteger();
  public final AtomicInteger failCompletes = new AtomicInteger();
  public final AtomicInteger failReleases = new AtomicInteger();
  public final AtomicInteger failExtensions = new AtomicInteger();
  public final AtomicInteger failFinds = new AtomicInteger();
  public final List<ClaimRequest> claimRequests = new CopyOnWriteArrayList<>();

  public ObservedKeyStore(KeyStore delegate) {
    super(delegate);
  }

  public int calls() {
    return claims.get() + completes.get() + releases.get();
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    claims.incrementAndGet();
    claimRequests.add(request);
    failIfAsked(failClaims, "claim");
    ClaimResult result = delegate.claim(request);
    if (result instanceof ClaimResult.Existing e && e.record().state() == RecordState.IN_PROGRESS) {
      inFlightSeen.incrementAndGet();
    }
    return result;
  }

  @Override
  public boolean complete(CompleteRequest request) {
    completes.incrementAndGet();
    failIfAsked(failCompletes, "complete");
    return delegate.complete(request);
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    releases.incrementAndGet();
    failIfAsked(failReleases, "release");
    return delegate.release(keyId, ownerToken);
  }

  /** A take-back is the release of a claim nothing was sent under: counted and failed as one. */
  @Override
  public boolean takeBack(String keyId, String ownerToken, java.time.Instant now) {
    releases.incrementAndGet();
    failIfAsked(failReleases, "release");
    return delegate.takeBack(keyId, ownerToken, now);
  }

  @Override
  public boolean extend(ExtendRequest request) {
    extensions.incrementAndGet();
    failIfAsked(failExtensions, "extend");
    return delegate.extend(request);
  }

  @Override
  public java.util.Optional<dev.idempotency.spi.StoredRecord> find(
      String keyId, java.time.Instant now) {
    failIfAsked(failFinds, "find");
    return delegate.find(keyId, now);
  }

  private static void failIfAsked(AtomicInteger remaining, String operation) {
    if (remaining.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
      throw new KeyStoreException("injected failure of " + operation, null);
    }
  }
}
