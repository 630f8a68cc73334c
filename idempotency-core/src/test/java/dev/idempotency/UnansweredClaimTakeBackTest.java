package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 37 (SPEC 1, 14): a claim that failed after it reached the store, though the store applied
 * it (its answer was lost, or it landed after the guard gave up), does not hold its key: the guard
 * takes it back in the background, fenced by its owner token. The in-memory store, with the claim's
 * answer dropped in front of it; on real servers: {@code RedisStalledClaimTest}, {@code
 * DynamoDbStalledClaimTest}, {@code PostgresLostClaimAnswerTest} (reliability).
 */
class UnansweredClaimTakeBackTest {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final LosingStore store = new LosingStore(InMemoryKeyStore.builder().build());
  IdempotencyGuard guard;

  /** The in-memory store, whose claims can lose their answer, or be applied later by the test. */
  static final class LosingStore extends ForwardingKeyStore {
    final AtomicInteger applyAndLoseAnswer = new AtomicInteger();
    final AtomicInteger holdBack = new AtomicInteger();
    final AtomicReference<ClaimRequest> heldBack = new AtomicReference<>();
    final AtomicInteger failReleases = new AtomicInteger();
    final AtomicInteger releases = new AtomicInteger();
    final AtomicInteger releasesAnswered = new AtomicInteger();
    final AtomicInteger failFinds = new AtomicInteger();
    final AtomicInteger findsFailed = new AtomicInteger();

    LosingStore(KeyStore delegate) {
      super(delegate);
    }

    @Override
    public ClaimResult claim(ClaimRequest request) {
      if (holdBack.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        heldBack.set(request); // sent, not yet applied: the test lands it later
        throw new KeyStoreException("the claim timed out (held back)", null);
      }
      ClaimResult result = delegate.claim(request);
      if (applyAndLoseAnswer.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        throw new KeyStoreException("the claim's answer was lost", null);
      }
      return result;
    }

    /** Lands a claim held back: the store applies it late. */
    ClaimResult landHeldBack() {
      return delegate.claim(heldBack.get());
    }

    @Override
    public boolean release(String keyId, String ownerToken) {
      releases.incrementAndGet();
      if (failReleases.get() > 0) {
        throw new KeyStoreException("the store does not answer", null);
      }
      boolean released = delegate.release(keyId, ownerToken);
      releasesAnswered.incrementAndGet();
      return released;
    }

    /** The guard's take-back of an unsent claim: counted and failed as a release. */
    @Override
    public boolean takeBack(String keyId, String ownerToken, Instant now) {
      releases.incrementAndGet();
      if (failReleases.get() > 0) {
        throw new KeyStoreException("the store does not answer", null);
      }
      boolean takenBack = delegate.takeBack(keyId, ownerToken, now);
      releasesAnswered.incrementAndGet();
      return takenBack;
    }

    @Override
    public Optional<dev.idempotency.spi.StoredRecord> find(String keyId, Instant now) {
      if (failFinds.get() > 0) {
        findsFailed.incrementAndGet();
        throw new KeyStoreException("the store does not answer the probe", null);
      }
      return delegate.find(keyId, now);
    }
  }

  IdempotencyGuard guard(TakeoverPolicy policy, Duration lease) {
    guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .lease(lease)
            .inFlightWait(Duration.ZERO)
            .takeoverPolicy(policy)
            .closeGracePeriod(Duration.ofSeconds(5))
            .build();
    return guard;
  }

  @AfterEach
  void close() {
    store.failReleases.set(0);
    guard.close();
  }

  @ParameterizedTest
  @ValueSource(strings = {"blocking", "async"})
  void aClaimWhoseAnswerWasLostIsTakenBackAndARetrySends(String how) throws Exception {
    guard(TakeoverPolicy.TAKE_OVER, Duration.ofSeconds(30));
    String key = "lost-answer:" + how + ":" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    store.applyAndLoseAnswer.set(1);

    if (how.equals("blocking")) {
      assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
    } else {
      CompletableFuture<String> stage =
          guard
              .executeAsync(
                  key,
                  TTL,
                  ctx -> CompletableFuture.completedFuture("n_" + sends.incrementAndGet()))
              .toCompletableFuture();
      assertThatThrownBy(() -> stage.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .hasCauseInstanceOf(KeyStoreException.class);
    }
    assertThat(sends).hasValue(0);
    awaitFree(key);

    assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet())).isEqualTo("n_1");
    assertThat(guard.find(key).orElseThrow().attempt()).as("claimed afresh").isEqualTo(1);
  }

  /**
   * Strict mode, and the stray claim lands only after the store first answered the release (it held
   * nothing then): a follow-up release, within the lease, takes it back, so a retry sends instead
   * of getting "outcome unknown" for the window.
   */
  @Test
  void inStrictModeAClaimLandingAfterTheFirstReleaseIsTakenBackByAFollowUp() throws Exception {
    guard(TakeoverPolicy.REFUSE, Duration.ofMillis(1_600));
    String key = "lands-late:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    store.holdBack.set(1);

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class);
    await(() -> store.releasesAnswered.get() >= 1, "the first release to be answered");
    assertThat(store.landHeldBack())
        .as("the stray claim lands")
        .isEqualTo(new ClaimResult.Claimed(1, false));
    awaitFree(key);

    assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet())).isEqualTo("n_1");
    assertThat(sends).hasValue(1);
  }

  /**
   * The take-back is fenced: while the store did not answer it, the stray claim's lease ran out and
   * a retry took the key over; the releases that follow (the first and its follow-ups) leave the
   * new owner's claim alone, and its outcome is recorded.
   */
  @Test
  void aTakeBackNeverReleasesTheClaimOfTheCallThatTookTheKeyOver() throws Exception {
    Duration lease = Duration.ofMillis(800);
    guard(TakeoverPolicy.TAKE_OVER, lease);
    String key = "fenced:" + UUID.randomUUID();
    store.applyAndLoseAnswer.set(1);
    store.failReleases.set(1);
    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "never"))
        .isInstanceOf(KeyStoreException.class);
    await(() -> store.releases.get() >= 1, "a release tried while the store fails");
    clock.advance(lease.plusMillis(1));

    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    CompletableFuture<String> retry =
        CompletableFuture.supplyAsync(
            () ->
                awaitStore(
                    () ->
                        guard.execute(
                            key,
                            TTL,
                            ctx -> {
                              sending.countDown();
                              assertThat(finish.await(30, TimeUnit.SECONDS)).isTrue();
                              return "taken-over-" + ctx.attempt();
                            })));
    assertThat(sending.await(30, TimeUnit.SECONDS)).as("the retry took the key over").isTrue();
    int answeredBefore = store.releasesAnswered.get();
    store.failReleases.set(0);
    await(
        () -> store.releasesAnswered.get() >= answeredBefore + 3,
        "the release and two follow-ups to be answered");
    IdempotencyRecord record = guard.find(key).orElseThrow();
    finish.countDown();

    assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(record.attempt()).isEqualTo(2);
    assertThat(retry.get(30, TimeUnit.SECONDS)).isEqualTo("taken-over-2");
    assertThat(guard.find(key).orElseThrow().state()).isEqualTo(RecordState.COMPLETED);
  }

  /**
   * A take-back is not a running call: {@code close()} during an outage that outlasts it returns at
   * once (well within its 5 s grace period), as it did before take-backs existed.
   */
  @Test
  void closeDoesNotWaitForATakeBackTheStoreDoesNotAnswer() throws Exception {
    guard(TakeoverPolicy.TAKE_OVER, Duration.ofSeconds(30));
    store.applyAndLoseAnswer.set(1);
    store.failReleases.set(1);
    assertThatThrownBy(() -> guard.execute("outage:" + UUID.randomUUID(), TTL, ctx -> "never"))
        .isInstanceOf(KeyStoreException.class);
    await(() -> store.releases.get() >= 1, "a release tried while the store fails");

    long start = System.nanoTime();
    guard.close();

    assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start))
        .as("close() with a take-back pending, grace period 5 s")
        .isLessThan(2_500);
  }

  /**
   * While the guard's breaker is open (its probe, a {@code find}, keeps failing), a take-back asks
   * the store once, at once, and then no more; once the probe is answered, it takes the claim back.
   */
  @Test
  void aTakeBackWaitsWhileTheBreakerIsOpen() throws Exception {
    guard(TakeoverPolicy.TAKE_OVER, Duration.ofSeconds(30));
    String key = "breaker-open:" + UUID.randomUUID();
    store.applyAndLoseAnswer.set(1);
    store.failFinds.set(1);
    store.failReleases.set(1);
    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "never"))
        .isInstanceOf(KeyStoreException.class);
    await(() -> store.releases.get() >= 1, "the first release, at once");
    await(() -> store.findsFailed.get() >= 4, "four failed probes of the breaker");

    assertThat(store.releases).as("releases asked while the breaker is open").hasValue(1);
    store.failReleases.set(0);
    store.failFinds.set(0);
    awaitFree(key);
    assertThat(store.releases.get()).isGreaterThanOrEqualTo(1);
  }

  /** Nothing is released on the happy path, nor for a claim the store answered. */
  @Test
  void aClaimTheStoreAnsweredIsNeverTakenBack() throws Exception {
    guard(TakeoverPolicy.TAKE_OVER, Duration.ofSeconds(30));
    String key = "answered:" + UUID.randomUUID();
    assertThat(guard.execute(key, TTL, ctx -> "sent")).isEqualTo("sent");
    assertThat(guard.execute(key, TTL, ctx -> "again")).isEqualTo("sent");
    guard.close();

    assertThat(store.releases).hasValue(0);
  }

  /** Polls until the key is absent, through the guard's breaker (bounded). */
  private void awaitFree(String key) throws InterruptedException {
    await(() -> awaitStore(() -> guard.find(key)).isEmpty(), "the claim to be taken back");
  }

  /** Runs {@code call}, trying again while the guard's breaker refuses it (bounded). */
  private static <R> R awaitStore(java.util.function.Supplier<R> call) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        return call.get();
      } catch (KeyStoreException refused) {
        if (System.nanoTime() > deadline) {
          throw refused;
        }
        try {
          Thread.sleep(10); // a pause between two tries, bounded above by the deadline
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw refused;
        }
      }
    }
  }
}
