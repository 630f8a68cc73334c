package dev.idempotency;

import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;

/**
 * A store whose every operation is timed for the guard's observers. Used only when the guard has
 * observers; keeps the async face of a store that has one.
 */
final class TimedStore implements AsyncKeyStore {

  private final KeyStore store;
  private final AsyncKeyStore async;
  private final Observers observers;
  private final String kind;

  private TimedStore(KeyStore store, AsyncKeyStore async, Observers observers) {
    this.store = store;
    this.async = async;
    this.observers = observers;
    this.kind = store.kind();
  }

  /** The store as the guard calls it: timed if anyone observes, else itself. */
  static KeyStore of(KeyStore store, Observers observers) {
    if (observers.isEmpty()) {
      return store;
    }
    return new TimedStore(store, store instanceof AsyncKeyStore a ? a : null, observers);
  }

  /** Whether this wraps a store that has an async face of its own. */
  boolean hasAsyncFace() {
    return async != null;
  }

  private <R> R timed(String operation, Supplier<R> call) {
    long start = System.nanoTime();
    Throwable failure = null;
    try {
      return call.get();
    } catch (RuntimeException | Error e) {
      failure = e;
      throw e;
    } finally {
      observers.onStoreOperation(kind, operation, System.nanoTime() - start, failure);
    }
  }

  private <R> CompletionStage<R> timedAsync(String operation, Supplier<CompletionStage<R>> call) {
    long start = System.nanoTime();
    CompletionStage<R> stage;
    try {
      stage = call.get();
    } catch (RuntimeException e) {
      observers.onStoreOperation(kind, operation, System.nanoTime() - start, e);
      return CompletableFuture.failedFuture(e);
    }
    return stage.whenComplete(
        (result, failure) ->
            observers.onStoreOperation(
                kind, operation, System.nanoTime() - start, Stages.unwrapOrNull(failure)));
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    return timed("claim", () -> store.claim(request));
  }

  @Override
  public boolean complete(CompleteRequest request) {
    return timed("complete", () -> store.complete(request));
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    return timed("release", () -> store.release(keyId, ownerToken));
  }

  @Override
  public boolean takeBack(String keyId, String ownerToken, Instant now) {
    return timed("take_back", () -> store.takeBack(keyId, ownerToken, now));
  }

  @Override
  public boolean extend(ExtendRequest request) {
    return timed("extend", () -> store.extend(request));
  }

  @Override
  public Optional<StoredRecord> find(String keyId, Instant now) {
    return timed("find", () -> store.find(keyId, now));
  }

  @Override
  public boolean delete(String keyId, Instant now) {
    return timed("delete", () -> store.delete(keyId, now));
  }

  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    return timed("claim_all", () -> store.claimAll(requests));
  }

  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    return timed("complete_all", () -> store.completeAll(requests));
  }

  @Override
  public List<Boolean> extendAll(List<ExtendRequest> requests) {
    return timed("extend_all", () -> store.extendAll(requests));
  }

  @Override
  public CompletionStage<ClaimResult> claimAsync(ClaimRequest request) {
    return timedAsync("claim", () -> async.claimAsync(request));
  }

  @Override
  public CompletionStage<Boolean> completeAsync(CompleteRequest request) {
    return timedAsync("complete", () -> async.completeAsync(request));
  }

  @Override
  public CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken) {
    return timedAsync("release", () -> async.releaseAsync(keyId, ownerToken));
  }

  @Override
  public CompletionStage<Boolean> takeBackAsync(String keyId, String ownerToken, Instant now) {
    return timedAsync("take_back", () -> async.takeBackAsync(keyId, ownerToken, now));
  }

  @Override
  public int maxBatchSize() {
    return store.maxBatchSize();
  }

  @Override
  public int maxPayloadBytes() {
    return store.maxPayloadBytes();
  }

  @Override
  public boolean usesServerTime() {
    return store.usesServerTime();
  }

  @Override
  public String kind() {
    return kind;
  }
}
