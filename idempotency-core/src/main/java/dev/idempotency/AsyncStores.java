package dev.idempotency;

import dev.idempotency.spi.AsyncKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.function.Supplier;

/**
 * Gives every store an async face: its own if it has one, else its blocking calls on an executor.
 */
final class AsyncStores {
  private AsyncStores() {}

  static AsyncKeyStore of(KeyStore store, Executor blockingStoreExecutor) {
    boolean blockingUnderneath = store instanceof TimedStore timed && !timed.hasAsyncFace();
    if (store instanceof AsyncKeyStore async && !blockingUnderneath) {
      return async;
    }
    return new OnExecutor(store, blockingStoreExecutor);
  }

  /** Whether {@code store}'s calls wait their turn on an executor ({@link #of} made it so). */
  static boolean queuesCalls(AsyncKeyStore store) {
    return store instanceof OnExecutor;
  }

  /**
   * A claim of {@code call} on a store that {@link #queuesCalls queues its calls}, which asks the
   * guard's breaker ({@link CallBreaker#refusal()}) when it starts rather than when it was queued,
   * and tells the breaker of an answer or a failure before its thread takes the next queued claim
   * ({@link CallBreaker#claimAnsweredWhereAsked}, {@link CallBreaker#claimFailedWhereAsked}):
   * during an outage that hangs the store, the claims queued before the first failure then fail at
   * once with the breaker's refusal (nothing sent, the store not asked) instead of each waiting the
   * store's own bound in turn. Outcome writes and releases are never refused this way: they follow
   * a send.
   *
   * <p>Once {@link IdempotencyGuard#close()} has given up on the calls still running ({@link
   * GuardSettings#gaveUp()}), a claim that starts is refused without asking the store, and a claim
   * granted while close() gave up is released here, fenced, by the thread that holds it: its send
   * will never start, and its key must not stay claimed for a lease (issue 37).
   *
   * @param store a store for which {@link #queuesCalls} is true
   * @param request the claim
   * @param call the call that claims
   * @return the store's answer, or the refusal or failure as a failed stage
   */
  static CompletionStage<ClaimResult> claimWhenStarted(
      AsyncKeyStore store, ClaimRequest request, CallSupport<?> call) {
    OnExecutor queued = (OnExecutor) store;
    return queued.run(
        () -> {
          if (call.settings.gaveUp()) {
            throw call.lease.closedBeforeSend(0);
          }
          KeyStoreException refused = call.breaker.refusal();
          if (refused != null) {
            throw refused;
          }
          ClaimResult answer;
          try {
            answer = queued.store.claim(request);
          } catch (RuntimeException failure) {
            throw call.breaker.claimFailedWhereAsked(failure);
          }
          call.breaker.claimAnsweredWhereAsked(answer);
          if (answer instanceof ClaimResult.Claimed granted && call.settings.gaveUp()) {
            call.lease.releaseUnsent(request.ownerToken());
            throw call.lease.closedBeforeSend(granted.attempt());
          }
          return answer;
        });
  }

  /** A blocking store whose calls run on an executor, so the caller's thread never blocks. */
  private record OnExecutor(KeyStore store, Executor executor) implements AsyncKeyStore {

    private <R> CompletionStage<R> run(Supplier<R> call) {
      return CompletableFuture.supplyAsync(call, executor);
    }

    @Override
    public CompletionStage<ClaimResult> claimAsync(ClaimRequest request) {
      return run(() -> store.claim(request));
    }

    /**
     * Outcomes and releases follow a send that happened: on an application's executor whose threads
     * were interrupted ({@code shutdownNow()}), they are written all the same.
     */
    @Override
    public CompletionStage<Boolean> completeAsync(CompleteRequest request) {
      return run(() -> Interrupts.deferredDuring(() -> store.complete(request)));
    }

    @Override
    public CompletionStage<Boolean> releaseAsync(String keyId, String ownerToken) {
      return run(() -> Interrupts.deferredDuring(() -> store.release(keyId, ownerToken)));
    }

    @Override
    public CompletionStage<Boolean> takeBackAsync(
        String keyId, String ownerToken, java.time.Instant now) {
      return run(() -> Interrupts.deferredDuring(() -> store.takeBack(keyId, ownerToken, now)));
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      return store.claim(request);
    }

    @Override
    public boolean complete(CompleteRequest request) {
      return store.complete(request);
    }

    @Override
    public boolean release(String keyId, String ownerToken) {
      return store.release(keyId, ownerToken);
    }

    @Override
    public boolean takeBack(String keyId, String ownerToken, java.time.Instant now) {
      return store.takeBack(keyId, ownerToken, now);
    }

    @Override
    public boolean extend(ExtendRequest request) {
      return store.extend(request);
    }

    @Override
    public java.util.Optional<dev.idempotency.spi.StoredRecord> find(
        String keyId, java.time.Instant now) {
      return store.find(keyId, now);
    }

    @Override
    public boolean delete(String keyId, java.time.Instant now) {
      return store.delete(keyId, now);
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
    public int maxBatchSize() {
      return store.maxBatchSize();
    }

    @Override
    public String kind() {
      return store.kind();
    }
  }
}
