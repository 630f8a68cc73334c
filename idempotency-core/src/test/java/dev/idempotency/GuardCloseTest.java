package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.ObservedKeyStore;
import dev.idempotency.testservers.Poll;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** {@link IdempotencyGuard#close()}: the threads it started end, and it refuses calls after. */
class GuardCloseTest {

  static final Duration TTL = Duration.ofHours(1);
  final KeyStore store = InMemoryKeyStore.builder().build();
  final ExecutorService pool = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  /** Starts {@code guard.close()} on another thread and returns once it has begun. */
  Future<?> startClosing(IdempotencyGuard guard) throws InterruptedException {
    Future<?> closing = pool.submit(guard::close);
    await(() -> guard.settings().closed(), "close() to begin");
    return closing;
  }

  // ---- SPEC 14: calls running when close() starts finish as they would have

  /**
   * An async call whose provider answers after close() began: close waits for it, the caller gets
   * the result (not a RejectedExecutionException), and the outcome is recorded, so a retry on
   * another instance replays instead of sending again.
   */
  @Test
  void closeLetsAnAsyncCallInFlightFinishAndRecordsItsOutcome() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String key = key();
    CompletableFuture<String> provider = new CompletableFuture<>();
    AtomicInteger sends = new AtomicInteger();
    CompletableFuture<String> call =
        guard
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  sends.incrementAndGet();
                  return provider;
                })
            .toCompletableFuture();
    await(() -> sends.get() == 1, "the send to start");

    Future<?> closing = startClosing(guard);
    assertThat(closing.isDone()).as("close() waits for the call in flight").isFalse();
    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "new"))
        .as("a call started while closing")
        .isInstanceOf(IllegalStateException.class);
    provider.complete("n_801");
    closing.get(30, TimeUnit.SECONDS);

    assertThat(call.get(30, TimeUnit.SECONDS)).isEqualTo("n_801");
    IdempotencyGuard other = IdempotencyGuard.builder().store(store).build();
    assertThat(other.execute(key, TTL, ctx -> "sent again")).isEqualTo("n_801");
    assertThat(sends).hasValue(1);
  }

  /**
   * A blocking send that outlives its lease while close() waits for it keeps its lease renewed:
   * another instance never takes it over, and its outcome is recorded.
   */
  @Test
  void closeKeepsRenewingABlockingSendInFlightUntilItsOutcomeIsRecorded() throws Exception {
    ObservedKeyStore observed = new ObservedKeyStore(store);
    Duration lease = Duration.ofMillis(200);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(observed).lease(lease).build();
    IdempotencyGuard other =
        IdempotencyGuard.builder().store(store).lease(lease).inFlightWait(Duration.ZERO).build();
    String key = key();
    CountDownLatch providerAnswers = new CountDownLatch(1);
    AtomicInteger sends = new AtomicInteger();
    Future<String> call =
        pool.submit(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      providerAnswers.await();
                      return "n_802";
                    }));
    await(() -> sends.get() == 1, "the send to start");

    Future<?> closing = startClosing(guard);
    int renewedBefore = observed.extensions.get();
    await(() -> observed.extensions.get() >= renewedBefore + 4, "renewals while closing");
    assertThatThrownBy(() -> other.execute(key, TTL, ctx -> "taken over"))
        .isInstanceOf(IdempotencyInProgressException.class);
    providerAnswers.countDown();
    closing.get(30, TimeUnit.SECONDS);

    assertThat(call.get(30, TimeUnit.SECONDS)).isEqualTo("n_802");
    assertThat(other.execute(key, TTL, ctx -> "sent again")).isEqualTo("n_802");
    assertThat(sends).hasValue(1);
  }

  /**
   * What outlives the grace period is abandoned as a crash would leave it: close() returns, one
   * WARN names how many calls, the key is not released (the record stays in progress until its
   * lease runs out), and the caller's stage fails with a message that says what happened.
   */
  @Test
  void closeAbandonsWhatOutlivesItsGracePeriodWithoutReleasingIt() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofSeconds(10))
            .closeGracePeriod(Duration.ofMillis(300))
            .build();
    String key = key();
    CompletableFuture<String> provider = new CompletableFuture<>();
    CompletableFuture<String> call =
        guard.executeAsync(key, TTL, ctx -> provider).toCompletableFuture();

    String log = capturingStandardError(guard::close);
    provider.complete("too late");

    assertThat(log).contains("WARN").contains("1 calls still running after its grace period");
    assertThatThrownBy(() -> call.get(30, TimeUnit.SECONDS))
        .hasCauseInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed before this call")
        .hasMessageContaining("not recorded");
    IdempotencyGuard other = IdempotencyGuard.builder().store(store).build();
    assertThat(other.find(key))
        .get()
        .extracting(IdempotencyRecord::state)
        .isEqualTo(RecordState.IN_PROGRESS);
  }

  /**
   * A batch's key handed out when close() begins is waited for until it is reported; then the batch
   * hands out nothing more (the rest are lapsed, and released at record()), and what was reported
   * is written.
   */
  @Test
  void closeWaitsForABatchKeyBeingSentThenTheBatchHandsOutNoMore() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    List<IdempotencyRequest> requests =
        List.of(
            IdempotencyRequest.of(key(), TTL),
            IdempotencyRequest.of(key(), TTL),
            IdempotencyRequest.of(key(), TTL));
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    java.util.Iterator<Batch.Item> toSend = batch.toSend().iterator();
    Batch.Item first = toSend.next();

    Future<?> closing = startClosing(guard);
    assertThat(closing.isDone()).as("close() waits for the key being sent").isFalse();
    batch.succeeded(first, "n_803");
    closing.get(30, TimeUnit.SECONDS);

    assertThat(toSend.hasNext()).as("nothing handed out after close").isFalse();
    Batch.Recorded recorded = batch.record();
    assertThat(batch.lapsed()).hasSize(2);
    assertThat(recorded.released()).isEqualTo(2);
    IdempotencyGuard other = IdempotencyGuard.builder().store(store).build();
    assertThat(other.execute(first.key(), TTL, ctx -> "again")).isEqualTo("n_803");
    assertThat(other.execute(requests.get(1).key(), TTL, ctx -> "released")).isEqualTo("released");
  }

  static String capturingStandardError(Runnable work) {
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      work.run();
    } finally {
      System.setErr(original);
    }
    return captured.toString(StandardCharsets.UTF_8);
  }

  static String key() {
    return "close:" + UUID.randomUUID();
  }

  /** The lease deadline of a key's record, as the store holds it. */
  private java.time.Instant leaseDeadline(String key) {
    return store.find(Digests.keyId(key), java.time.Instant.now()).orElseThrow().leaseDeadline();
  }

  /** The names of the live threads of one guard. */
  static List<String> threadsOf(IdempotencyGuard guard) {
    String prefix = guard.settings().executors.threadPrefix;
    return Thread.getAllStackTraces().keySet().stream()
        .filter(Thread::isAlive)
        .map(Thread::getName)
        .filter(name -> name.startsWith(prefix))
        .toList();
  }

  /**
   * A command-line program that used a guard's async path, its lease keeper and a batch exits
   * promptly once it closes the guard: no thread of the guard is left (exec:java waits for them).
   */
  @Test
  void closeEndsEveryThreadTheGuardStarted() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).lease(Duration.ofMillis(200)).build();
    guard
        .executeAsync(
            key(), TTL, ctx -> java.util.concurrent.CompletableFuture.completedFuture("async"))
        .toCompletableFuture()
        .get(30, TimeUnit.SECONDS);
    String slow = key();
    guard.execute(
        slow,
        TTL,
        ctx -> {
          java.time.Instant claimed = leaseDeadline(slow);
          await(() -> leaseDeadline(slow).isAfter(claimed), "the keeper to renew the lease once");
          return "slow";
        });
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key(), TTL)), ResultCodec.string());
    assertThat(threadsOf(guard)).as("the guard started threads").isNotEmpty();

    guard.close();

    await(() -> threadsOf(guard).isEmpty(), "the guard's threads to end");
    assertThat(batch.claimedKeys()).hasSize(1);
  }

  @Test
  void callsAfterCloseAreRefusedAndCloseIsIdempotent() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    String key = key();
    guard.execute(key, TTL, ctx -> "sent");

    guard.close();
    guard.close();

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "again"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed");
    assertThatThrownBy(() -> guard.executeAsync(key, TTL, ctx -> null))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(
            () -> guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string()))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> guard.find(key)).isInstanceOf(IllegalStateException.class);
  }

  /** What an unrecorded batch reported is written at close, not left to run out. */
  @Test
  void closeWritesWhatAnUnrecordedBatchReported() {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).lease(Duration.ofMinutes(1)).build();
    List<IdempotencyRequest> requests =
        List.of(IdempotencyRequest.of(key(), TTL), IdempotencyRequest.of(key(), TTL));
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    Batch.Item first = batch.toSend().iterator().next();
    batch.succeeded(first, "reported");

    guard.close();
    IdempotencyGuard other = IdempotencyGuard.builder().store(store).build();

    assertThat(other.execute(first.key(), TTL, ctx -> "again")).isEqualTo("reported");
  }

  @Test
  void closeLeavesTheApplicationsExecutorsAlone() throws Exception {
    ExecutorService mine = Executors.newFixedThreadPool(2);
    try {
      IdempotencyGuard guard =
          IdempotencyGuard.builder()
              .store(store)
              .asyncExecutor(mine)
              .blockingStoreExecutor(mine)
              .build();
      guard
          .executeAsync(
              key(), TTL, ctx -> java.util.concurrent.CompletableFuture.completedFuture("a"))
          .toCompletableFuture()
          .get(30, TimeUnit.SECONDS);

      guard.close();

      assertThat(mine.isShutdown()).isFalse();
      assertThat(mine.submit(() -> "still works").get(30, TimeUnit.SECONDS))
          .isEqualTo("still works");
    } finally {
      mine.shutdownNow();
    }
  }

  /**
   * A call whose claim is answered after the grace period ran out: the guard renews nothing any
   * more, so the send must not start (a crash would never start it), or a second instance takes the
   * key over after the lease and sends again.
   */
  @Test
  void aCallThatReachesItsSendAfterTheGracePeriodSendsNothing() throws Exception {
    java.util.concurrent.CountDownLatch claimAsked = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch answerClaim = new java.util.concurrent.CountDownLatch(1);
    KeyStore slowClaims =
        new dev.idempotency.tck.ForwardingKeyStore(store) {
          @Override
          public dev.idempotency.spi.ClaimResult claim(dev.idempotency.spi.ClaimRequest request) {
            claimAsked.countDown();
            try {
              answerClaim.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            return delegate.claim(request);
          }
        };
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(slowClaims)
            .closeGracePeriod(Duration.ofMillis(100))
            .build();
    java.util.concurrent.atomic.AtomicInteger sends =
        new java.util.concurrent.atomic.AtomicInteger();
    String key = key();
    java.util.concurrent.Future<String> call =
        pool.submit(() -> guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet()));
    assertThat(claimAsked.await(30, TimeUnit.SECONDS)).isTrue();

    capturingStandardError(guard::close); // returns after the grace period, with one WARN
    answerClaim.countDown();

    assertThatThrownBy(() -> call.get(30, TimeUnit.SECONDS))
        .hasCauseInstanceOf(KeyStoreException.class)
        .hasMessageContaining("closed")
        .hasMessageContaining("nothing was sent");
    assertThat(sends).hasValue(0);
  }

  /**
   * A second close() while the first waits out the running calls returns only once the guard is
   * closed: code that closes the store or its pool right after must not do so under a running call.
   */
  @Test
  void aSecondCloseWaitsForTheFirst() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).closeGracePeriod(Duration.ofSeconds(30)).build();
    java.util.concurrent.CountDownLatch sending = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.Future<String> call =
        pool.submit(
            () ->
                guard.execute(
                    key(),
                    TTL,
                    ctx -> {
                      sending.countDown();
                      release.await(30, TimeUnit.SECONDS);
                      return "sent";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
    java.util.concurrent.Future<?> first = pool.submit(guard::close);
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(5))
        .until(
            "the first close to begin: new calls are refused",
            () -> {
              try {
                guard.execute(key(), TTL, ctx -> "probe");
                return false;
              } catch (IllegalStateException closing) {
                return true;
              }
            });

    java.util.concurrent.Future<?> second = pool.submit(guard::close);
    assertThatThrownBy(() -> second.get(300, TimeUnit.MILLISECONDS))
        .isInstanceOf(java.util.concurrent.TimeoutException.class);
    release.countDown();
    second.get(30, TimeUnit.SECONDS);
    // the first close's own thread may return a moment after the second: what matters is above,
    // the second close did not return while the call still ran
    first.get(30, TimeUnit.SECONDS);
    assertThat(call.get(30, TimeUnit.SECONDS)).isEqualTo("sent");
  }
}
