package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The guard's promises on a store, where time passes for real: a sender that outlives its lease is
 * renewed and never taken over, a batch longer than its lease sends each key once while a second
 * worker competes, large batches claim only unsent keys, async calls send once per key, and typed
 * results replay typed (its lease, batch-record and interrupt cases are in {@link
 * GuardLeaseContract}, {@link GuardBatchContract} and {@link GuardInterruptContract}). Extend it
 * beside {@link KeyStoreContract}, for example as a JUnit {@code @Nested} class of the store's
 * test:
 *
 * <pre>{@code
 * class MyKeyStoreTest extends KeyStoreContract {
 *   protected KeyStore store() { return STORE; }
 *
 *   @Nested
 *   class OnTheGuard extends GuardOnStoreContract {
 *     protected KeyStore store() { return STORE; }
 *   }
 * }
 * }</pre>
 */
public abstract class GuardOnStoreContract extends GuardInterruptContract {

  /**
   * An operator looks a key up, and resends it on purpose: {@code find} reports the send without
   * changing it, {@code forget} lets the next call send again, and a key in progress is never
   * forgotten.
   */
  @Test
  public void findAndForgetThroughTheGuard() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).inFlightWait(ZERO).build();
    String key = "support:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();
    guard.execute(key, LONG_RETENTION, ctx -> "n_" + sends.incrementAndGet());

    dev.idempotency.IdempotencyRecord sent = guard.find(key).orElseThrow();
    boolean forgotten = guard.forget(key);
    String resent = guard.execute(key, LONG_RETENTION, ctx -> "n_" + sends.incrementAndGet());

    assertThat(sent.state()).isEqualTo(dev.idempotency.spi.RecordState.COMPLETED);
    assertThat(sent.attempt()).isEqualTo(1);
    assertThat(sent.completedAt()).isNotNull();
    assertThat(sent.expiresAt()).isAfter(sent.createdAt());
    assertThat(forgotten).isTrue();
    assertThat(resent).isEqualTo("n_2");
    assertThat(guard.find("support:" + newKeyId())).isEmpty();

    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    String busy = "support-busy:" + newKeyId();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<String> running =
          pool.submit(
              () ->
                  guard.execute(
                      busy,
                      LONG_RETENTION,
                      ctx -> {
                        sending.countDown();
                        release.await(30, TimeUnit.SECONDS);
                        return "busy";
                      }));
      assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
      assertThat(guard.find(busy).orElseThrow().state())
          .isEqualTo(dev.idempotency.spi.RecordState.IN_PROGRESS);
      assertThat(guard.forget(busy)).as("a key in progress is never forgotten").isFalse();
      release.countDown();
      assertThat(running.get(30, TimeUnit.SECONDS)).isEqualTo("busy");
    } finally {
      release.countDown();
      pool.shutdownNow();
    }
  }

  /**
   * A batch that runs four times its lease, each send well within the lease, with a second worker
   * claiming the same keys all along: every key is sent exactly once, and every outcome recorded.
   */
  @Test
  public void batchThatOutlivesItsLeaseWithASecondWorkerSendsEachKeyOnce() throws Exception {
    IdempotencyGuard first = IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).build();
    IdempotencyGuard second =
        IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).build();
    String run = newKeyId();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      requests.add(IdempotencyRequest.of("long-batch:" + run + ":" + i, LONG_RETENTION));
    }
    Map<String, List<String>> sends = new ConcurrentHashMap<>();
    AtomicBoolean firstDone = new AtomicBoolean();
    CountDownLatch firstClaimed = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<Batch.Recorded> firstRun =
          pool.submit(
              () -> {
                try {
                  Batch<String> batch = first.claimBatch(requests, ResultCodec.string());
                  firstClaimed.countDown();
                  for (Batch.Item item : batch.toSend()) {
                    sends
                        .computeIfAbsent(item.key(), k -> new CopyOnWriteArrayList<>())
                        .add("first");
                    awaitElapsed(System.nanoTime(), RENEWED_LEASE.multipliedBy(2).dividedBy(5));
                    batch.succeeded(item, "first:" + item.key());
                  }
                  return batch.record();
                } finally {
                  firstDone.set(true);
                }
              });
      assertThat(firstClaimed.await(60, TimeUnit.SECONDS)).isTrue();
      int secondSent = 0;
      while (!firstDone.get()) {
        Batch<String> batch = second.claimBatch(requests, ResultCodec.string());
        for (Batch.Item item : batch.toSend()) {
          sends.computeIfAbsent(item.key(), k -> new CopyOnWriteArrayList<>()).add("second");
          batch.succeeded(item, "second:" + item.key());
          secondSent++;
        }
        batch.record();
        pause(100);
      }
      Batch.Recorded recorded = firstRun.get(60, TimeUnit.SECONDS);

      assertThat(sends).hasSize(10);
      assertThat(sends.values())
          .as("sends per key, first worker and second worker together")
          .allSatisfy(senders -> assertThat(senders).hasSize(1));
      assertThat(secondSent).as("the second worker sent nothing: every key was held").isZero();
      assertThat(recorded.completed()).isEqualTo(10);
      assertThat(recorded.notRecorded()).isEmpty();
      Batch<String> repeat = second.claimBatch(requests, ResultCodec.string());
      assertThat(repeat.replayed()).hasSize(10);
      assertThat(repeat.replayed().values())
          .allSatisfy(outcome -> assertThat(outcome.value()).startsWith("first:"));
    } finally {
      pool.shutdownNow();
    }
  }

  /** 1,200 keys: three chunks on JDBC (500 keys each), two on stores with the default 1,000. */
  @Test
  public void largeBatchThroughTheGuardClaimsOnlyUnsentKeysAndRepeatsSendNothing() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String run = newKeyId();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 1_200; i++) {
      requests.add(IdempotencyRequest.of("batch:" + run + ":" + i, LONG_RETENTION));
    }
    for (int i = 0; i < requests.size(); i += 10) {
      guard.execute(requests.get(i).key(), LONG_RETENTION, ctx -> "early");
    }

    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "n:" + item.key());
    }
    Batch.Recorded recorded = batch.record();
    Batch<String> again = guard.claimBatch(requests, ResultCodec.string());

    assertThat(batch.claimedKeys()).hasSize(1_080);
    assertThat(batch.replayed())
        .hasSize(120)
        .allSatisfy((key, outcome) -> assertThat(outcome.value()).isEqualTo("early"));
    assertThat(recorded.completed()).isEqualTo(1_080);
    assertThat(recorded.notRecorded()).isEmpty();
    assertThat(again.toSend()).as("a repeated batch sends nothing").isEmpty();
    assertThat(again.replayed()).hasSize(1_200);
    assertThat(again.replayed().get(requests.get(1).key()).value())
        .isEqualTo("n:" + requests.get(1).key());
  }

  @Test
  public void asyncExecuteReplaysAndSendsOncePerKey() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store()).inFlightWait(Duration.ofSeconds(60)).build();
    String key = "async:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();
    List<CompletableFuture<String>> calls = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      calls.add(
          guard
              .executeAsync(
                  key,
                  LONG_RETENTION,
                  ctx -> CompletableFuture.supplyAsync(() -> "n_" + sends.incrementAndGet()))
              .toCompletableFuture());
    }

    List<String> results = new ArrayList<>();
    for (CompletableFuture<String> call : calls) {
      results.add(call.get(60, TimeUnit.SECONDS));
    }

    assertThat(sends).hasValue(1);
    assertThat(results).containsOnly("n_1");
  }

  // ---- typed results

  /** A provider's receipt, the kind of typed result a sender returns. */
  public record Receipt(String providerMessageId, int segments) {}

  /** Stores a receipt as {@code id|segments}: any codec will do, the store sees bytes. */
  protected static final ResultCodec<Receipt> RECEIPTS =
      ResultCodec.ofText(
          receipt -> receipt.providerMessageId() + "|" + receipt.segments(),
          text ->
              new Receipt(
                  text.substring(0, text.lastIndexOf('|')),
                  Integer.parseInt(text.substring(text.lastIndexOf('|') + 1))));

  /**
   * A typed result is stored through its codec and replayed as the same type by every form of the
   * call: {@code execute}, {@code executeForOutcome} and their async twins.
   */
  @Test
  public void typedResultsReplayTypedThroughEveryFormOfTheCall() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String key = "typed:" + newKeyId();
    Receipt sent = new Receipt("msg|" + newToken(), 2);
    AtomicInteger sends = new AtomicInteger();

    Receipt first =
        guard.execute(
            key,
            LONG_RETENTION,
            RECEIPTS,
            ctx -> {
              sends.incrementAndGet();
              return sent;
            });
    Receipt again = guard.execute(key, LONG_RETENTION, RECEIPTS, ctx -> new Receipt("other", 9));
    dev.idempotency.Outcome<Receipt> outcome =
        guard.executeForOutcome(
            IdempotencyRequest.of(key, LONG_RETENTION), RECEIPTS, ctx -> new Receipt("other", 9));
    Receipt async =
        guard
            .executeAsync(
                key,
                LONG_RETENTION,
                RECEIPTS,
                ctx -> CompletableFuture.completedFuture(new Receipt("other", 9)))
            .toCompletableFuture()
            .get(60, TimeUnit.SECONDS);
    dev.idempotency.Outcome<Receipt> asyncOutcome =
        guard
            .executeForOutcomeAsync(
                IdempotencyRequest.of(key, LONG_RETENTION),
                RECEIPTS,
                ctx -> CompletableFuture.completedFuture(new Receipt("other", 9)))
            .toCompletableFuture()
            .get(60, TimeUnit.SECONDS);

    assertThat(sends).hasValue(1);
    assertThat(first).isEqualTo(sent);
    assertThat(again).isEqualTo(sent);
    assertThat(async).isEqualTo(sent);
    assertThat(outcome.value()).isEqualTo(sent);
    assertThat(outcome.replayed()).isTrue();
    assertThat(asyncOutcome.value()).isEqualTo(sent);
    assertThat(asyncOutcome.replayed()).isTrue();
  }
}
