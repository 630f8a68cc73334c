package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Lease renewal and the batch's own keeping of its keys, on the in-memory store in real time (the
 * system clock): what the opt-out and the limit do, what renewal costs, when a batch writes, which
 * keys it hands out, and the bounds the guard puts on what it stores and how it retries.
 */
class LeaseRenewalTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofMillis(400);

  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  final ExecutorService pool = Executors.newCachedThreadPool();

  IdempotencyGuard.Builder guard() {
    return IdempotencyGuard.builder()
        .store(store)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .listener(events::add);
  }

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  static String newKey() {
    return "renew:" + UUID.randomUUID();
  }

  /** Claims the key with another guard until that succeeds; returns the nanoTime it did. */
  long awaitTakeover(IdempotencyGuard other, String key, AtomicInteger sends)
      throws InterruptedException {
    AtomicInteger takenAt = new AtomicInteger();
    long[] at = new long[1];
    await(
        () -> {
          try {
            other.execute(
                key,
                TTL,
                ctx -> {
                  at[0] = System.nanoTime();
                  takenAt.set(ctx.attempt());
                  return "taken-over-" + sends.incrementAndGet();
                });
            return takenAt.get() > 1;
          } catch (IdempotencyInProgressException stillHeld) {
            return false;
          }
        },
        "a takeover");
    return at[0];
  }

  @Test
  void withRenewalOffASlowSenderIsTakenOverAfterOneLease() throws Exception {
    IdempotencyGuard noRenewal = guard().leaseRenewal(false).build();
    String key = newKey();
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch release = new CountDownLatch(1);
    Future<String> slow =
        pool.submit(
            () ->
                noRenewal.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      release.await(30, TimeUnit.SECONDS);
                      return "slow";
                    }));
    await(() -> sends.get() == 1, "the slow send to start");

    awaitTakeover(guard().build(), key, sends);
    release.countDown();
    slow.get(30, TimeUnit.SECONDS);

    assertThat(sends).hasValue(2);
    assertThat(store.extensions).as("nothing was renewed").hasValue(0);
    assertThat(events).extracting(IdempotencyEvent::type).contains(Type.LEASE_OVERRUN);
  }

  @Test
  void renewalStopsAtItsLimitAndTheHungSenderIsTakenOverAfterIt() throws Exception {
    Duration limit = Duration.ofMillis(1_200);
    IdempotencyGuard limited = guard().leaseRenewalLimit(limit).build();
    String key = newKey();
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch release = new CountDownLatch(1);
    long start = System.nanoTime();
    Future<String> hung =
        pool.submit(
            () ->
                limited.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      release.await(30, TimeUnit.SECONDS);
                      return "hung";
                    }));
    await(() -> sends.get() == 1, "the hung send to start");

    long takenOverAt = awaitTakeover(guard().build(), key, sends);
    release.countDown();
    hung.get(30, TimeUnit.SECONDS);

    assertThat(TimeUnit.NANOSECONDS.toMillis(takenOverAt - start))
        .as("held for the renewal limit, not just one lease")
        .isGreaterThanOrEqualTo(limit.toMillis());
    assertThat(store.extensions.get()).as("renewed meanwhile").isGreaterThan(1);
    assertThat(events).extracting(IdempotencyEvent::type).contains(Type.LEASE_OVERRUN);
  }

  @Test
  void sendsShorterThanAQuarterLeaseCostNoRenewal() {
    IdempotencyGuard guard = guard().lease(Duration.ofSeconds(30)).build();

    for (int i = 0; i < 200; i++) {
      guard.execute(newKey(), TTL, ctx -> "fast");
    }

    assertThat(store.extensions).hasValue(0);
    assertThat(events).extracting(IdempotencyEvent::type).doesNotContain(Type.LEASE_OVERRUN);
  }

  @Test
  void aBatchWritesEachOutcomeWithinAPeriodWithoutWaitingForRecord() throws Exception {
    IdempotencyGuard guard = guard().build();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of(newKey(), TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    Batch.Item first = batch.toSend().iterator().next();

    batch.succeeded(first, "n_first");
    IdempotencyGuard other = guard().build();
    await(
        () -> {
          try {
            return "n_first".equals(other.execute(first.key(), TTL, ctx -> "again"));
          } catch (IdempotencyInProgressException notYetWritten) {
            return false;
          }
        },
        "the outcome to be written by the keeper");

    Batch.Recorded recorded = batch.record();
    assertThat(recorded.completed()).isEqualTo(1);
    assertThat(recorded.released()).as("the two keys never sent").isEqualTo(2);
  }

  @Test
  void aFullChunkOfOutcomesIsWrittenAtOnce() {
    KeyStore smallChunks = new SmallChunks(store, 4);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(smallChunks).build();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      requests.add(IdempotencyRequest.of(newKey(), TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    List<Batch.Item> items = new ArrayList<>();
    batch.toSend().forEach(items::add);

    for (int i = 0; i < 3; i++) {
      batch.succeeded(items.get(i), "n_" + i);
    }
    int beforeTheFourth = store.completes.get();
    batch.succeeded(items.get(3), "n_3");

    assertThat(beforeTheFourth).isZero();
    assertThat(store.completes).as("a full chunk is written on the reporting thread").hasValue(4);
    batch.record();
  }

  @Test
  void aKeyWhoseLeaseLapsedIsNeverHandedOutAndIsReleasedAtRecord() throws Exception {
    IdempotencyGuard guard = guard().build();
    store.failExtensions.set(Integer.MAX_VALUE); // the store cannot renew anything
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of(newKey(), TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    AtomicInteger sends = new AtomicInteger();
    String last = requests.get(2).key();
    awaitTakeover(guard().build(), last, sends);

    List<Batch.Item> handedOut = new ArrayList<>();
    batch.toSend().forEach(handedOut::add);
    Batch.Recorded recorded = batch.record();

    assertThat(handedOut).as("no key is handed out once its lease lapsed").isEmpty();
    assertThat(batch.lapsed()).containsExactlyElementsOf(batch.claimedKeys());
    assertThat(recorded.released())
        .as("the two keys still ours are released; the one taken over is not ours to release")
        .isEqualTo(2);
    assertThat(sends).as("the key taken over was sent once, by the other caller").hasValue(1);
  }

  @Test
  void anItemReportedTwiceIsRefused() {
    IdempotencyGuard guard = guard().build();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(newKey(), TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();
    batch.succeeded(item, "n_1");

    assertThatThrownBy(() -> batch.failed(item, new IllegalStateException("late")))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("already reported");
    assertThat(batch.record().completed()).isEqualTo(1);
  }

  /** A permanent failure whose text is longer than the store takes is stored, cut to fit. */
  @Test
  void aPermanentFailureLongerThanTheStoreTakesIsStoredCutToFitAndNeverResent() {
    ObservedKeyStore small =
        new ObservedKeyStore(InMemoryKeyStore.builder().maxPayloadBytes(64).build());
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(small)
            .failureClassifier(failure -> failure instanceof IllegalArgumentException)
            .build();
    String key = newKey();
    AtomicInteger sends = new AtomicInteger();
    String longText = "invalid phone number: " + "x".repeat(10_000);

    assertThatThrownBy(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      throw new IllegalArgumentException(longText);
                    }))
        .isInstanceOf(IllegalArgumentException.class);
    Throwable repeat =
        org.assertj.core.api.Assertions.catchThrowable(
            () -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()));

    assertThat(repeat).isInstanceOf(IdempotencyStoredFailureException.class);
    assertThat(sends).as("the provider is not called again").hasValue(1);
  }

  /** One item whose outcome is too long for the store never fails its chunk's other items. */
  @Test
  void oneOversizedFailureInABatchNeverFailsItsChunk() {
    ObservedKeyStore small =
        new ObservedKeyStore(InMemoryKeyStore.builder().maxPayloadBytes(64).build());
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(small)
            .failureClassifier(failure -> failure instanceof IllegalArgumentException)
            .build();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of(newKey(), TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    List<Batch.Item> items = new ArrayList<>();
    batch.toSend().forEach(items::add);

    batch.succeeded(items.get(0), "n_0");
    batch.failed(items.get(1), new IllegalArgumentException("bad: " + "y".repeat(10_000)));
    batch.succeeded(items.get(2), "n_2");
    Batch.Recorded recorded = batch.record();

    assertThat(recorded.completed()).isEqualTo(2);
    assertThat(recorded.failuresStored()).isEqualTo(1);
    assertThat(recorded.notRecorded()).isEmpty();
  }

  /**
   * The default executor of blocking stores is bounded: a burst of async calls on a store that
   * blocks never runs more than {@link DefaultExecutors#STORE_IO_THREADS} of them at once.
   */
  @Test
  void theDefaultBlockingStoreExecutorIsBounded() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    BlockingClaims blocking = new BlockingClaims(store, release);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(blocking).build();
    List<CompletableFuture<String>> calls = new ArrayList<>();
    try {
      for (int i = 0; i < 64; i++) {
        calls.add(
            guard
                .executeAsync(newKey(), TTL, ctx -> CompletableFuture.completedFuture("n"))
                .toCompletableFuture());
      }
      await(
          () -> blocking.inside.get() >= DefaultExecutors.STORE_IO_THREADS, "the pool to fill up");
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
      while (System.nanoTime() < until) {
        assertThat(blocking.inside.get())
            .as("claims blocked at once")
            .isLessThanOrEqualTo(DefaultExecutors.STORE_IO_THREADS);
        Thread.sleep(10); // checks, for half a second, that no more claims get in: under test
      }
    } finally {
      release.countDown();
    }
    for (CompletableFuture<String> call : calls) {
      assertThat(call.get(30, TimeUnit.SECONDS)).isEqualTo("n");
    }
  }

  /** The pauses between completion retries double from 50 ms but never exceed a second. */
  @Test
  void completionRetriesPauseAtMostASecondEach() {
    IdempotencyGuard patient = guard().lease(Duration.ofSeconds(30)).completionAttempts(10).build();
    store.failCompletes.set(9);
    long start = System.nanoTime();

    Outcome<String> outcome =
        patient.executeForOutcome(
            IdempotencyRequest.of(newKey(), TTL), ResultCodec.string(), ctx -> "n_1");

    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertThat(outcome.recorded()).as("recorded at the tenth attempt").isTrue();
    assertThat(millis)
        .as("nine pauses: 50, 100, 200, 400, 800 ms, then 1 s each (25 s uncapped)")
        .isBetween(5_000L, 15_000L);
    assertThat(CallSupport.completionBackoffMillis(64)).isEqualTo(1_000);
  }

  /** A store that splits batches into chunks of a given size. */
  // ---- a claim answered late is renewed before its sender runs

  /** Three quarters of the lease: the keeper, every quarter lease, may come too late. */
  static final Duration LATE = LEASE.multipliedBy(3).dividedBy(4);

  @Test
  void aClaimAnsweredAfterHalfItsLeaseIsRenewedBeforeTheSenderRuns() {
    IdempotencyGuard guard = guard().store(new LateAnswers(store, LATE)).build();
    AtomicInteger renewedBeforeSend = new AtomicInteger(-1);

    String result =
        guard.execute(
            newKey(),
            TTL,
            ctx -> {
              renewedBeforeSend.set(store.extensions.get());
              return "sent";
            });

    assertThat(result).isEqualTo("sent");
    assertThat(renewedBeforeSend).as("renewals when the sender started").hasValue(1);
  }

  @Test
  void anAsyncClaimAnsweredAfterHalfItsLeaseIsRenewedBeforeTheSenderRuns() throws Exception {
    IdempotencyGuard guard = guard().store(new LateAnswers(store, LATE)).build();
    AtomicInteger renewedBeforeSend = new AtomicInteger(-1);

    String result =
        guard
            .executeAsync(
                newKey(),
                TTL,
                ctx -> {
                  renewedBeforeSend.set(store.extensions.get());
                  return CompletableFuture.completedFuture("sent");
                })
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);

    assertThat(result).isEqualTo("sent");
    assertThat(renewedBeforeSend).as("renewals when the sender started").hasValue(1);
  }

  @Test
  void aLateClaimWhoseRenewalFailsSendsNothingAndSaysSo() {
    IdempotencyGuard guard = guard().store(new LateAnswers(store, LATE)).build();
    store.failExtensions.set(Integer.MAX_VALUE);
    AtomicInteger sends = new AtomicInteger();

    assertThatThrownBy(() -> guard.execute(newKey(), TTL, ctx -> "sent-" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("its lease could not be renewed")
        .hasMessageContaining("nothing was sent");
    assertThat(sends).hasValue(0);
    assertThat(events).extracting(IdempotencyEvent::type).contains(Type.STORE_ERROR);
  }

  @Test
  void aBatchClaimedAfterHalfItsLeaseIsRenewedBeforeAnyKeyIsHandedOut() {
    IdempotencyGuard guard = guard().store(new LateAnswers(store, LATE)).build();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of(newKey(), TTL));
    }

    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    int renewedBeforeHandOut = store.extensions.get();
    List<Batch.Item> handedOut = new ArrayList<>();
    batch.toSend().forEach(handedOut::add);
    handedOut.forEach(item -> batch.succeeded(item, "sent"));
    batch.record();

    assertThat(renewedBeforeHandOut)
        .as("each key of the late chunk renewed before any was handed out")
        .isEqualTo(3);
    assertThat(handedOut).hasSize(3);
  }

  /** Longer than the lease: a claim answered this late has run out when the guard reads it. */
  static final Duration LAPSED = LEASE.multipliedBy(5).dividedBy(4);

  @Test
  void withRenewalOffAClaimAnsweredAfterItsLeaseSendsNothing() {
    IdempotencyGuard guard =
        guard().leaseRenewal(false).store(new LateAnswers(store, LAPSED)).build();
    AtomicInteger sends = new AtomicInteger();

    assertThatThrownBy(() -> guard.execute(newKey(), TTL, ctx -> "sent-" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("nothing was sent");
    assertThat(sends).hasValue(0);
  }

  @Test
  void withRenewalOffAnAsyncClaimAnsweredAfterItsLeaseSendsNothing() {
    IdempotencyGuard guard =
        guard().leaseRenewal(false).store(new LateAnswers(store, LAPSED)).build();
    AtomicInteger sends = new AtomicInteger();

    CompletableFuture<String> result =
        guard
            .executeAsync(
                newKey(),
                TTL,
                ctx -> CompletableFuture.completedFuture("sent-" + sends.incrementAndGet()))
            .toCompletableFuture();

    assertThatThrownBy(() -> result.get(30, TimeUnit.SECONDS))
        .hasCauseInstanceOf(KeyStoreException.class)
        .hasMessageContaining("nothing was sent");
    assertThat(sends).hasValue(0);
  }

  @Test
  void aClaimAnsweredInTimeCostsNoRenewalBeforeItsSend() {
    IdempotencyGuard guard = guard().build();
    AtomicInteger renewedBeforeSend = new AtomicInteger(-1);

    guard.execute(
        newKey(),
        TTL,
        ctx -> {
          renewedBeforeSend.set(store.extensions.get());
          return "sent";
        });

    assertThat(renewedBeforeSend).hasValue(0);
  }

  /** A store whose answers to claims arrive {@code delay} after the claim took effect. */
  static final class LateAnswers extends ForwardingKeyStore {
    private final Duration delay;

    LateAnswers(KeyStore delegate, Duration delay) {
      super(delegate);
      this.delay = delay;
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      return late(delegate.claim(request));
    }

    @Override
    public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
      return late(delegate.claimAll(requests));
    }

    private <R> R late(R answer) {
      try {
        Thread.sleep(delay.toMillis()); // a store that answers late: under test
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return answer;
    }
  }

  static final class SmallChunks extends ForwardingKeyStore {
    private final int chunk;

    SmallChunks(KeyStore delegate, int chunk) {
      super(delegate);
      this.chunk = chunk;
    }

    @Override
    public int maxBatchSize() {
      return chunk;
    }
  }

  /** A blocking store whose claims wait for a latch, counting how many wait at once. */
  static final class BlockingClaims extends ForwardingKeyStore {
    private final CountDownLatch release;
    final AtomicInteger inside = new AtomicInteger();

    BlockingClaims(KeyStore delegate, CountDownLatch release) {
      super(delegate);
      this.release = release;
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      inside.incrementAndGet();
      try {
        release.await(60, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        inside.decrementAndGet();
      }
      return delegate.claim(request);
    }
  }
}
