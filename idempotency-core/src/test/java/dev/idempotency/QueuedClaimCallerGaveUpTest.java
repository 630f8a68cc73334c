package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37: an async call on a blocking store whose caller gave up (cancelled its stage, or let it
 * time out) while its claim still waited in the store executor's queue never sends that claim to
 * the store: nothing is claimed, nothing sent, the key stays free; a repeat waiting for a call in
 * flight whose caller gave up stops polling the store. The store is the in-memory one behind a
 * blocking face ({@link ObservedKeyStore}), so its calls queue on the executor given here.
 */
class QueuedClaimCallerGaveUpTest {

  static final Duration TTL = Duration.ofHours(1);

  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final ExecutorService storeIo = Executors.newSingleThreadExecutor();
  final CountDownLatch busy = new CountDownLatch(1);

  /** The calls that ended because their caller gave up, as the guard's observer saw them. */
  final AtomicInteger gaveUp = new AtomicInteger();

  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .blockingStoreExecutor(storeIo)
          .inFlightWait(Duration.ofSeconds(20))
          .observer(
              new IdempotencyObserver() {
                @Override
                public CallObservation onCallStart(String operation, String storeKind) {
                  return new CallObservation() {
                    @Override
                    public void onEnd(Throwable failure) {
                      if (failure instanceof CallBreaker.CallerGaveUp) {
                        gaveUp.incrementAndGet();
                      }
                    }
                  };
                }
              })
          .build();

  @AfterEach
  void close() {
    busy.countDown();
    guard.close();
    storeIo.shutdownNow();
  }

  @Test
  void aCancelledCallSendsNoClaim() throws Exception {
    givesUpWhileQueued(stage -> stage.cancel(false));
  }

  @Test
  void aCallWhoseCallerTimedOutSendsNoClaim() throws Exception {
    givesUpWhileQueued(
        stage -> {
          assertThatThrownBy(() -> stage.orTimeout(50, TimeUnit.MILLISECONDS).join())
              .hasCauseInstanceOf(java.util.concurrent.TimeoutException.class);
          return true;
        });
  }

  private void givesUpWhileQueued(Function<CompletableFuture<String>, Boolean> giveUp)
      throws Exception {
    storeIo.execute(
        () -> {
          try {
            busy.await(30, TimeUnit.SECONDS); // the store's executor is busy: the claim queues
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
    String key = "queued:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    CompletableFuture<String> stage =
        guard
            .executeAsync(
                key, TTL, ctx -> CompletableFuture.completedFuture("n_" + sends.incrementAndGet()))
            .toCompletableFuture();
    giveUp.apply(stage);
    busy.countDown();
    // the executor runs its queue in order: once this has run, so has the queued claim
    CompletableFuture.runAsync(() -> {}, storeIo).get(30, TimeUnit.SECONDS);

    assertThat(store.claims).as("claims sent to the store").hasValue(0);
    assertThat(sends).hasValue(0);
    awaitUntil(() -> gaveUp.get() == 1); // the call ends on the async executor
    assertThat(guard.find(key)).isEmpty();
    assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet())).isEqualTo("n_1");
  }

  @Test
  void aWaitingRepeatWhoseCallerCancelledStopsPolling() throws Exception {
    String key = "waiting:" + UUID.randomUUID();
    CountDownLatch firstStarted = new CountDownLatch(1);
    CompletableFuture<String> firstSend = new CompletableFuture<>();
    CompletableFuture<String> first =
        guard
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  firstStarted.countDown();
                  return firstSend;
                })
            .toCompletableFuture();
    assertThat(firstStarted.await(30, TimeUnit.SECONDS)).isTrue();
    AtomicInteger repeatSends = new AtomicInteger();
    CompletableFuture<String> repeat =
        guard
            .executeAsync(
                key,
                TTL,
                ctx -> CompletableFuture.completedFuture("r_" + repeatSends.incrementAndGet()))
            .toCompletableFuture();
    awaitUntil(() -> store.claims.get() >= 2); // the repeat found the key in flight: it waits
    repeat.cancel(false);

    // it ends at its next poll, long before its 20 s inFlightWait, while the first still sends
    awaitUntil(() -> gaveUp.get() == 1);
    int claimsWhenItEnded = store.claims.get();
    firstSend.complete("first");
    assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("first");
    assertThat(store.claims).as("claims after the repeat ended").hasValue(claimsWhenItEnded);
    assertThat(repeatSends).hasValue(0);
    assertThat(guard.execute(key, TTL, ctx -> "again")).isEqualTo("first");
  }

  /** Polls {@code condition} for at most 10 s (the fixed guard ends the call within 0.5 s). */
  private static void awaitUntil(java.util.function.BooleanSupplier condition)
      throws InterruptedException {
    Poll.within(Duration.ofSeconds(10))
        .every(Duration.ofMillis(5))
        .until("the condition", condition::getAsBoolean);
  }
}
