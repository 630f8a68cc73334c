package dev.idempotency.spring.messaging;

import dev.idempotency.KeyStoreException;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The application's store in the messaging tests: the real in-memory store, which a test can make
 * fail as a stopped server does.
 */
public final class SwitchableKeyStore implements KeyStore {

  public final AtomicBoolean down = new AtomicBoolean();

  /**
   * While set, the store refuses renewals ({@code extend}) as a stopped store does, and answers
   * everything else: a claim's lease runs out while its owner's renewals fail.
   */
  public final AtomicBoolean renewalsDown = new AtomicBoolean();

  /** How often a claim reached the store (one per key of a batch), counted while up or down. */
  public final AtomicInteger claims = new AtomicInteger();

  /** How often a call reached the store while it was down, and was refused. */
  public final AtomicInteger refused = new AtomicInteger();

  /**
   * If set, the next claim is made at once but its answer comes back only when this latch opens (at
   * most a minute later): a slow network, or a paused process. Used once.
   */
  public final AtomicReference<CountDownLatch> heldClaimAnswer = new AtomicReference<>();

  /** If set, every call fails with it: a store client's own exception, not a KeyStoreException. */
  public final AtomicReference<RuntimeException> failsWith = new AtomicReference<>();

  private final KeyStore delegate = InMemoryKeyStore.builder().build();

  private void check() {
    RuntimeException failure = failsWith.get();
    if (failure != null) {
      refused.incrementAndGet();
      throw failure;
    }
    if (down.get()) {
      refused.incrementAndGet();
      throw new KeyStoreException("the store is down (test)", null);
    }
  }

  private <R> R late(R answer) {
    CountDownLatch held = heldClaimAnswer.getAndSet(null);
    if (held != null) {
      try {
        held.await(1, TimeUnit.MINUTES);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    return answer;
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    claims.incrementAndGet();
    check();
    return late(delegate.claim(request));
  }

  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    claims.addAndGet(requests.size());
    check();
    return late(delegate.claimAll(requests));
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
    if (renewalsDown.get()) {
      refused.incrementAndGet();
      throw new KeyStoreException("the store refuses renewals (test)", null);
    }
    return delegate.extend(request);
  }

  @Override
  public int maxBatchSize() {
    return delegate.maxBatchSize();
  }

  /** The record as the in-memory store holds it, whether the store is up or down. */
  @Override
  public Optional<StoredRecord> find(String keyId, Instant now) {
    return delegate.find(keyId, now);
  }
}
