package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * SPEC 14 (issue 37 item 17), "during a store outage each caller gets its error at once": the
 * claims of {@code executeAsync} calls on a blocking store wait their turn on the store executor;
 * each asks the guard's breaker when it starts, so the claims queued behind one that meets a hung
 * store are refused once it fails, instead of each asking the store and waiting its bound in turn.
 * An outcome write after a send is never refused that way (SPEC 6).
 */
class QueuedClaimsOutageTest {

  static final Duration TTL = Duration.ofHours(1);
  static final long WAIT_SECONDS = 30;

  /** One thread: every claim after the first waits in its queue, deterministically. */
  final ExecutorService storeIo = Executors.newSingleThreadExecutor();

  @AfterEach
  void stopThreads() throws InterruptedException {
    storeIo.shutdownNow();
    assertThat(storeIo.awaitTermination(WAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
  }

  /**
   * A store that hangs while down, as a database whose table another session locks: each claim, and
   * the guard's probe read, waits until {@link #failNow} opens, then fails. Outcome writes still
   * work (the hang is of new claims only, which is all this test needs).
   */
  static final class HangingStore extends ForwardingKeyStore {
    final AtomicBoolean down = new AtomicBoolean();
    final CountDownLatch claimHangs = new CountDownLatch(1);
    final CountDownLatch failNow = new CountDownLatch(1);
    final AtomicInteger claimsWhileDown = new AtomicInteger();

    HangingStore(KeyStore delegate) {
      super(delegate);
    }

    private void hangThenFail() {
      try {
        failNow.await(WAIT_SECONDS, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      throw new KeyStoreException("Connection refused", null);
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      if (down.get()) {
        claimsWhileDown.incrementAndGet();
        claimHangs.countDown();
        hangThenFail();
      }
      return delegate.claim(request);
    }

    @Override
    public Optional<StoredRecord> find(String keyId, Instant now) {
      if (down.get()) {
        hangThenFail();
      }
      return delegate.find(keyId, now);
    }
  }

  @Test
  void claimsQueuedBehindAHungClaimAreRefusedWhenTheyStartAndAnOutcomeIsStillWritten()
      throws Exception {
    HangingStore store = new HangingStore(InMemoryKeyStore.builder().build());
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).blockingStoreExecutor(storeIo).build()) {
      CountDownLatch sending = new CountDownLatch(1);
      // the provider answers when the test says so; an async send, since a claim answered before
      // the call returns goes on to its send on the calling thread, the test's (a blocking sender
      // waiting there for the test to let it finish waited out its whole 30 s bound)
      CompletableFuture<String> providerAnswer = new CompletableFuture<>();
      AsyncSender<String> provider =
          ctx -> {
            sending.countDown();
            return providerAnswer;
          };
      CompletableFuture<Outcome<String>> inFlight =
          guard
              .executeForOutcomeAsync(
                  IdempotencyRequest.of("queued:" + UUID.randomUUID(), TTL),
                  ResultCodec.string(),
                  provider)
              .toCompletableFuture();
      assertThat(sending.await(WAIT_SECONDS, TimeUnit.SECONDS)).isTrue();

      store.down.set(true);
      AtomicInteger sends = new AtomicInteger();
      List<CompletableFuture<String>> queued = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        queued.add(
            guard
                .executeAsync(
                    "queued:" + UUID.randomUUID(),
                    TTL,
                    AsyncSender.of(
                        ctx -> {
                          sends.incrementAndGet();
                          return "sent";
                        }))
                .toCompletableFuture());
      }
      // the first holds the store's one thread, hung; the other nine wait in its queue
      assertThat(store.claimHangs.await(WAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
      store.failNow.countDown();
      try {
        assertQueuedClaimsRefused(store, queued, sends);
      } finally {
        providerAnswer.complete("sent");
      }
      Outcome<String> outcome = inFlight.get(WAIT_SECONDS, TimeUnit.SECONDS);
      assertThat(outcome.value()).isEqualTo("sent");
      assertThat(outcome.recorded())
          .as("the outcome of a send that happened is written while the breaker is open")
          .isTrue();
    }
  }

  /**
   * Once the guard's probe saw the store answer again (half-open), the claims that were queued
   * meanwhile take their turn: the first to start is the one trial, and its answer, told to the
   * breaker before the store's thread takes the next claim, lets the rest go to the store. None of
   * them held the trial while it waited in the queue, and none is refused by a store that answers.
   */
  @Test
  void claimsQueuedWhileHalfOpenAreSentOnceTheFirstOfThemIsAnswered() throws Exception {
    HangingStore store = new HangingStore(InMemoryKeyStore.builder().build());
    store.failNow.countDown(); // while down, fail at once
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).blockingStoreExecutor(storeIo).build()) {
      store.down.set(true);
      CompletableFuture<String> failed =
          guard
              .executeAsync("queued:" + UUID.randomUUID(), TTL, AsyncSender.of(ctx -> "sent"))
              .toCompletableFuture();
      assertThat(failureOf(failed)).isInstanceOf(KeyStoreException.class);
      store.down.set(false);
      StoreOutages outages = guard.settings().outages;
      IdempotencyGuardTest.await(
          () -> outages.failing() && outages.refusalBeforeQueueing() == null,
          "the guard's probe to see the store answer (half-open)");

      CountDownLatch storeThreadBusy = new CountDownLatch(1);
      CountDownLatch freeStoreThread = new CountDownLatch(1);
      storeIo.execute(
          () -> {
            storeThreadBusy.countDown();
            try {
              freeStoreThread.await(WAIT_SECONDS, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          });
      assertThat(storeThreadBusy.await(WAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
      List<CompletableFuture<String>> queued = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        queued.add(
            guard
                .executeAsync("queued:" + UUID.randomUUID(), TTL, AsyncSender.of(ctx -> "sent"))
                .toCompletableFuture());
      }
      freeStoreThread.countDown();

      for (CompletableFuture<String> call : queued) {
        assertThat(call.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo("sent");
      }
      assertThat(outages.failing()).as("the breaker closed").isFalse();
    }
  }

  private static void assertQueuedClaimsRefused(
      HangingStore store, List<CompletableFuture<String>> queued, AtomicInteger sends)
      throws Exception {
    int refusedByTheBreaker = 0;
    for (CompletableFuture<String> call : queued) {
      Throwable failure = failureOf(call);
      assertThat(failure).isInstanceOf(KeyStoreException.class);
      assertThat(failure).hasMessageContaining("Connection refused");
      if (failure.getMessage().contains("nothing was sent. Last failure")) {
        refusedByTheBreaker++;
      }
    }
    assertThat(store.claimsWhileDown).as("claims that asked the hung store").hasValue(1);
    assertThat(refusedByTheBreaker).as("queued claims refused as they started").isEqualTo(9);
    assertThat(sends).as("nothing sent during the outage").hasValue(0);
  }

  private static Throwable failureOf(CompletableFuture<String> call) throws Exception {
    try {
      call.get(WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (ExecutionException failed) {
      return failed.getCause();
    }
    throw new AssertionError("the call succeeded during the outage");
  }
}
