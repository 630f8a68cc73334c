package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.tck.ObservedKeyStore;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** executeAsync and claimBatch keep every per-key rule of execute. */
class AsyncAndBatchTest {

  static final Duration TTL = Duration.ofHours(24);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));

  /** Not an AsyncKeyStore: async calls go through the blocking-store executor. */
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());

  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  final AtomicInteger sends = new AtomicInteger();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(store).clock(clock).listener(events::add).build();

  static String newKey() {
    return "k:" + UUID.randomUUID();
  }

  /** Starts a call whose send never finishes, and waits (bounded) until it holds the claim. */
  static void startNeverEndingSend(IdempotencyGuard guard, String key) throws InterruptedException {
    java.util.concurrent.CountDownLatch sending = new java.util.concurrent.CountDownLatch(1);
    guard.executeAsync(
        key,
        TTL,
        ctx -> {
          sending.countDown();
          return new CompletableFuture<String>();
        });
    assertThat(sending.await(30, TimeUnit.SECONDS)).as("the first call claimed the key").isTrue();
  }

  AsyncSender<String> sender(String result) {
    return ctx -> {
      sends.incrementAndGet();
      return CompletableFuture.completedFuture(result);
    };
  }

  static Throwable failureOf(java.util.concurrent.CompletionStage<?> stage) {
    try {
      stage.toCompletableFuture().get(30, TimeUnit.SECONDS);
      throw new AssertionError("expected a failure");
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void asyncFirstCallSendsAndRepeatReplays() throws Exception {
    String key = newKey();

    Outcome<String> first =
        guard
            .executeForOutcomeAsync(
                IdempotencyRequest.of(key, TTL), ResultCodec.string(), sender("n_1"))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);
    Outcome<String> repeat =
        guard
            .executeForOutcomeAsync(
                IdempotencyRequest.of(key, TTL), ResultCodec.string(), sender("n_2"))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);

    assertThat(first).isEqualTo(new Outcome<>("n_1", false, 1, true));
    assertThat(repeat).isEqualTo(new Outcome<>("n_1", true, 1, true));
    assertThat(sends).hasValue(1);
  }

  @Test
  void asyncRepeatWaitsForAnInFlightCallWithoutBlockingAndReplays() throws Exception {
    IdempotencyGuard patient =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofSeconds(60)).build();
    String key = newKey();
    CompletableFuture<String> provider = new CompletableFuture<>();
    java.util.concurrent.CountDownLatch sending = new java.util.concurrent.CountDownLatch(1);
    CompletableFuture<String> first =
        patient
            .executeAsync(
                key,
                TTL,
                ctx -> {
                  sends.incrementAndGet();
                  sending.countDown();
                  return provider;
                })
            .toCompletableFuture();

    assertThat(sending.await(30, TimeUnit.SECONDS)).as("the first call claimed the key").isTrue();
    long start = System.nanoTime();
    CompletableFuture<String> repeat =
        patient.executeAsync(key, TTL, sender("x")).toCompletableFuture();
    long returnedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertThat(returnedAfterMillis).as("executeAsync returned without waiting").isLessThan(5_000);
    assertThat(repeat).isNotDone();
    provider.complete("n_801");

    assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("n_801");
    assertThat(repeat.get(30, TimeUnit.SECONDS)).isEqualTo("n_801");
    assertThat(sends).hasValue(1);
  }

  @Test
  void asyncRepeatGivesUpWithInProgress() throws Exception {
    IdempotencyGuard impatient =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofMillis(30)).build();
    String key = newKey();
    startNeverEndingSend(impatient, key);

    assertThat(failureOf(impatient.executeAsync(key, TTL, sender("x"))))
        .isInstanceOf(IdempotencyInProgressException.class);
  }

  @Test
  void asyncFailuresArriveAsExecuteWouldThrowThemAndReleaseTheKey() throws Exception {
    String key = newKey();
    IllegalStateException boom = new IllegalStateException("provider down");

    assertThat(failureOf(guard.executeAsync(key, TTL, ctx -> CompletableFuture.failedFuture(boom))))
        .isSameAs(boom);
    IOException io = new IOException("reset");
    assertThat(
            failureOf(
                guard.executeAsync(
                    key,
                    TTL,
                    ctx -> {
                      throw io;
                    })))
        .isInstanceOf(SendFailedException.class)
        .hasCause(io);
    assertThat(
            guard
                .executeAsync(key, TTL, sender("n_3"))
                .toCompletableFuture()
                .get(30, TimeUnit.SECONDS))
        .isEqualTo("n_3");
    assertThat(events.stream().filter(e -> e.type() == Type.RELEASED)).hasSize(2);
  }

  @Test
  void asyncPermanentFailureIsStoredAndReplayed() {
    IdempotencyGuard classifying =
        IdempotencyGuard.builder()
            .store(store)
            .failureClassifier(f -> f instanceof IllegalArgumentException)
            .build();
    String key = newKey();
    failureOf(
        classifying.executeAsync(
            key,
            TTL,
            ctx -> CompletableFuture.failedFuture(new IllegalArgumentException("bad number"))));

    assertThat(failureOf(classifying.executeAsync(key, TTL, sender("x"))))
        .isInstanceOf(IdempotencyStoredFailureException.class)
        .hasMessageContaining("bad number");
    assertThat(sends).hasValue(0);
  }

  @Test
  void asyncTakesOverAnExpiredLeaseAndStrictModeRefuses() throws Exception {
    String key = newKey();
    startNeverEndingSend(guard, key);
    clock.advance(IdempotencyGuard.DEFAULT_LEASE);
    IdempotencyGuard strict =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .takeoverPolicy(TakeoverPolicy.REFUSE)
            .build();

    assertThat(failureOf(strict.executeAsync(key, TTL, sender("x"))))
        .isInstanceOf(IdempotencyOutcomeUnknownException.class);
    Outcome<String> takeover =
        guard
            .executeForOutcomeAsync(
                IdempotencyRequest.of(key, TTL), ResultCodec.string(), sender("n_2"))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);
    assertThat(takeover.attempt()).isEqualTo(2);
  }

  @Test
  void asyncStoreFailureFailsClosedOrOpen() throws Exception {
    store.failClaims.set(1);
    assertThat(failureOf(guard.executeAsync(newKey(), TTL, sender("x"))))
        .isInstanceOf(KeyStoreException.class);
    assertThat(sends).hasValue(0);

    IdempotencyGuard open = IdempotencyGuard.builder().store(store).failOpen(true).build();
    store.failClaims.set(1);
    Outcome<String> sent =
        open.executeForOutcomeAsync(
                IdempotencyRequest.of(newKey(), TTL), ResultCodec.string(), sender("n_1"))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);
    assertThat(sent.recorded()).isFalse();
    assertThat(sends).hasValue(1);
  }

  @Test
  void asyncCompletionIsRetriedThenReported() throws Exception {
    store.failCompletes.set(100);

    Outcome<String> outcome =
        guard
            .executeForOutcomeAsync(
                IdempotencyRequest.of(newKey(), TTL), ResultCodec.string(), sender("n_1"))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);

    assertThat(outcome.value()).isEqualTo("n_1");
    assertThat(outcome.recorded()).isFalse();
    // the call's own attempts; then the guard goes on in the background
    // (BackgroundOutcomeWriteTest)
    assertThat(store.completes.get())
        .isGreaterThanOrEqualTo(IdempotencyGuard.DEFAULT_COMPLETION_ATTEMPTS);
  }

  @Test
  void batchSortsKeysAndKeepsPerKeySemantics() throws Exception {
    IdempotencyGuard classifying =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .failureClassifier(f -> f instanceof IllegalArgumentException)
            .build();
    String sent = newKey();
    String reused = newKey();
    String inFlight = newKey();
    classifying.execute(sent, TTL, ctx -> "early");
    classifying.executeForOutcome(
        IdempotencyRequest.of(reused, TTL).withFingerprint("a"), ResultCodec.string(), ctx -> "r");
    startNeverEndingSend(classifying, inFlight);
    List<String> fresh = List.of(newKey(), newKey(), newKey(), newKey());
    List<IdempotencyRequest> requests = new ArrayList<>();
    fresh.forEach(k -> requests.add(IdempotencyRequest.of(k, TTL)));
    requests.add(IdempotencyRequest.of(sent, TTL));
    requests.add(IdempotencyRequest.of(reused, TTL).withFingerprint("b"));
    requests.add(IdempotencyRequest.of(inFlight, TTL));

    Batch<String> batch = classifying.claimBatch(requests, ResultCodec.string());
    List<Batch.Item> items = new ArrayList<>();
    batch.toSend().forEach(items::add);
    batch.succeeded(items.get(0), "n_0");
    batch.failed(items.get(1), new IllegalStateException("transient"));
    batch.failed(items.get(2), new IllegalArgumentException("bad number"));
    // items.get(3) gets no outcome, and was not sent: the caller has it released (record() would
    // leave it claimed, its send possibly still running: BatchRecordRacingSendsProbeTest)
    Batch.Recorded recorded = batch.recordReleasingUnreported();

    assertThat(items).extracting(Batch.Item::key).containsExactlyElementsOf(fresh);
    assertThat(items).allMatch(item -> item.context().attempt() == 1);
    assertThat(batch.replayed()).containsOnlyKeys(sent);
    assertThat(batch.refused().get(reused)).isInstanceOf(IdempotencyKeyReuseException.class);
    assertThat(batch.inFlight()).containsExactly(inFlight);
    assertThat(recorded).isEqualTo(new Batch.Recorded(1, 1, 2, java.util.Set.of()));
    String replayed = classifying.execute(fresh.get(0), TTL, ctx -> "again");
    assertThat(replayed).isEqualTo("n_0");
    String retried = classifying.execute(fresh.get(1), TTL, ctx -> "retried");
    assertThat(retried).as("a transient failure released the key").isEqualTo("retried");
    assertThatThrownBy(() -> classifying.execute(fresh.get(2), TTL, ctx -> "x"))
        .isInstanceOf(IdempotencyStoredFailureException.class);
    String released = classifying.execute(fresh.get(3), TTL, ctx -> "later");
    assertThat(released).isEqualTo("later");
  }

  @Test
  void batchReportsAStoreFailurePerKeyAndSendsNothingForIt() {
    store.failClaims.set(2);
    List<IdempotencyRequest> requests =
        List.of(
            IdempotencyRequest.of(newKey(), TTL),
            IdempotencyRequest.of(newKey(), TTL),
            IdempotencyRequest.of(newKey(), TTL));

    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());

    assertThat(batch.refused())
        .hasSize(2)
        .allSatisfy((key, e) -> assertThat(e).isInstanceOf(KeyStoreException.class));
    assertThat(batch.toSend()).hasSize(1);
  }

  @Test
  void batchRefusesMisuse() {
    String key = newKey();
    assertThatThrownBy(
            () ->
                guard.claimBatch(
                    List.of(IdempotencyRequest.of(key, TTL), IdempotencyRequest.of(key, TTL)),
                    ResultCodec.string()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("duplicate key");
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(newKey(), TTL)), ResultCodec.string());
    Batch<String> other =
        guard.claimBatch(List.of(IdempotencyRequest.of(newKey(), TTL)), ResultCodec.string());
    assertThatThrownBy(() -> batch.succeeded(other.toSend().iterator().next(), "x"))
        .isInstanceOf(IllegalArgumentException.class);
    batch.record();
    assertThatThrownBy(batch::record).isInstanceOf(IllegalStateException.class);
  }
}
