package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Open finding (issue 37, fixstall; not fixed): an async call on a blocking store whose caller gave
 * up (cancelled its stage, or let it time out) while its claim still waited in the store executor's
 * queue should never send that claim to the store (nothing claimed, nothing sent, the key free).
 * The store is the in-memory one behind a blocking face ({@link ObservedKeyStore}), so its calls
 * queue on the executor given here. Fails on the current code (the claim reaches the store, and the
 * call sends though nobody waits); a fix that let the caller's stage tell the call (a
 * CompletableFuture subclass) passed it but broke MonoCancelBeforeSendTest or, merged with main,
 * CloseFromCallbackTest, and was reverted.
 */
@Tag("open-finding")
class QueuedClaimCallerGaveUpProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final ExecutorService storeIo = Executors.newSingleThreadExecutor();
  final CountDownLatch busy = new CountDownLatch(1);
  final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(store).blockingStoreExecutor(storeIo).build();

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
    assertThat(guard.find(key)).isEmpty();
    assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet())).isEqualTo("n_1");
  }
}
