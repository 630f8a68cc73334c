package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
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
 * results replay typed. Extend it beside {@link KeyStoreContract}, for example as a JUnit
 * {@code @Nested} class of the store's test:
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
public abstract class GuardOnStoreContract extends StoreContractSupport {

  // ---- lease renewal and long batches, where time passes for real

  /** The lease of the real-time guard tests: short, so that the tests outlive it several times. */
  protected static final Duration RENEWED_LEASE = Duration.ofSeconds(1);

  /**
   * A sender that runs three leases is renewed in the background and never taken over: a second
   * caller polling all along only ever sees it in progress, then gets its result.
   */
  @Test
  public void senderThatOutlivesItsLeaseIsRenewedAndNeverTakenOver() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).inFlightWait(ZERO).build();
    String key = "renewal:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<String> slow =
          startSlowSend(
              pool,
              sends,
              RENEWED_LEASE.multipliedBy(3),
              sender -> guard.execute(key, LONG_RETENTION, sender));
      int polls = pollWhileRunning(guard, key, slow, sends, 50);

      assertThat(slow.get(30, TimeUnit.SECONDS)).isEqualTo("slow");
      assertThat(sends).as("the slow send was never taken over").hasValue(1);
      assertThat(polls).as("the second caller polled while it ran").isGreaterThan(10);
      String replay = guard.execute(key, LONG_RETENTION, ctx -> "again");
      assertThat(replay).isEqualTo("slow");
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A claim the store answers after more than half its lease (a slow store, a slow network) is
   * renewed before its sender runs: the keeper renews every quarter lease, and a send started on
   * what is left could be taken over before its first renewal. A second caller polls all along.
   */
  @Test
  public void claimAnsweredAfterMostOfItsLeaseIsRenewedBeforeTheSendAndNeverTakenOver()
      throws Exception {
    AtomicInteger extensions = new AtomicInteger();
    CountDownLatch claimed = new CountDownLatch(1);
    Duration late = RENEWED_LEASE.multipliedBy(7).dividedBy(10);
    KeyStore slow =
        new ForwardingKeyStore(store()) {
          @Override
          public ClaimResult claim(ClaimRequest request) {
            ClaimResult answer = delegate.claim(request);
            claimed.countDown();
            pause(late.toMillis());
            return answer;
          }

          @Override
          public boolean extend(ExtendRequest request) {
            extensions.incrementAndGet();
            return delegate.extend(request);
          }

          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            extensions.addAndGet(requests.size());
            return delegate.extendAll(requests);
          }
        };
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(slow).lease(RENEWED_LEASE).inFlightWait(ZERO).build();
    IdempotencyGuard second =
        IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).inFlightWait(ZERO).build();
    String key = "late-claim:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();
    AtomicInteger renewedBeforeSend = new AtomicInteger(-1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<String> first =
          pool.submit(
              () ->
                  guard.execute(
                      key,
                      LONG_RETENTION,
                      ctx -> {
                        renewedBeforeSend.set(extensions.get());
                        sends.incrementAndGet();
                        awaitElapsed(System.nanoTime(), RENEWED_LEASE.multipliedBy(2));
                        return "first";
                      }));
      assertThat(claimed.await(30, TimeUnit.SECONDS)).isTrue();
      pollWhileRunning(second, key, first, sends, 20);

      assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("first");
      assertThat(renewedBeforeSend).as("renewals before the sender started").hasValue(1);
      assertThat(sends).as("the late claim's send was never taken over").hasValue(1);
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A claim whose lease, even renewed at once, would leave less than the keeper's margin (a quarter
   * lease) when the sender starts is not sent on: the store answered the claim late, and its
   * renewal late too. Nothing is sent, the caller gets {@link KeyStoreException}, and the key is
   * released.
   */
  @Test
  public void claimWhoseRenewalLeavesLessThanTheMarginIsNotSentOn() {
    Duration lease = Duration.ofMillis(1000);
    KeyStore slow =
        new ForwardingKeyStore(store()) {
          @Override
          public ClaimResult claim(ClaimRequest request) {
            ClaimResult answer = delegate.claim(request);
            pause(lease.toMillis() * 6 / 10);
            return answer;
          }

          @Override
          public boolean extend(ExtendRequest request) {
            boolean extended = delegate.extend(request);
            pause(lease.toMillis() * 85 / 100);
            return extended;
          }

          @Override
          public List<Boolean> extendAll(List<ExtendRequest> requests) {
            List<Boolean> extended = delegate.extendAll(requests);
            pause(lease.toMillis() * 85 / 100);
            return extended;
          }
        };
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(slow).lease(lease).inFlightWait(ZERO).build();
    String key = "margin:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();

    assertThatThrownBy(
            () -> guard.execute(key, LONG_RETENTION, ctx -> "sent-" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class);
    String retried =
        IdempotencyGuard.builder()
            .store(store())
            .lease(lease)
            .build()
            .execute(key, LONG_RETENTION, ctx -> "retried-" + sends.incrementAndGet());

    assertThat(retried).as("the key was released, not left to run out").isEqualTo("retried-1");
    assertThat(sends).hasValue(1);
  }

  /**
   * A sender that returns normally on a thread whose interrupt flag is set (a {@code
   * Future.cancel(true)}, a {@code shutdownNow()} or a time limiter, while the provider call was
   * finishing) has its outcome recorded all the same, and the flag is still set afterwards.
   */
  @Test
  public void senderThatReturnsOnAnInterruptedThreadHasItsOutcomeRecorded() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String key = "interrupted:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();

    Outcome<String> first;
    boolean interruptedAfterwards;
    try {
      first =
          guard.executeForOutcome(
              IdempotencyRequest.of(key, LONG_RETENTION),
              ResultCodec.string(),
              ctx -> {
                sends.incrementAndGet();
                beforeAnInterruptedOutcomeIsWritten();
                Thread.currentThread().interrupt();
                return "sent";
              });
    } finally {
      interruptedAfterwards = Thread.interrupted();
    }
    String again = guard.execute(key, LONG_RETENTION, ctx -> "again-" + sends.incrementAndGet());

    assertThat(interruptedAfterwards).as("the interrupt is kept for the caller").isTrue();
    assertThat(first.recorded()).as("the outcome was written").isTrue();
    assertThat(again).isEqualTo("sent");
    assertThat(sends).hasValue(1);
  }

  /** A failed send on an interrupted thread is released all the same: a retry sends at once. */
  @Test
  public void failedSendOnAnInterruptedThreadIsReleased() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String key = "interrupted-failure:" + newKeyId();

    boolean interruptedAfterwards;
    try {
      assertThatThrownBy(
              () ->
                  guard.execute(
                      key,
                      LONG_RETENTION,
                      ctx -> {
                        beforeAnInterruptedOutcomeIsWritten();
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("provider refused");
                      }))
          .hasMessage("provider refused");
    } finally {
      interruptedAfterwards = Thread.interrupted();
    }
    Outcome<String> retry =
        IdempotencyGuard.builder()
            .store(store())
            .inFlightWait(ZERO)
            .build()
            .executeForOutcome(
                IdempotencyRequest.of(key, LONG_RETENTION), ResultCodec.string(), ctx -> "retry");

    assertThat(interruptedAfterwards).isTrue();
    assertThat(retry.value()).isEqualTo("retry");
    assertThat(retry.attempt()).as("released, not taken over").isEqualTo(1);
  }

  /** A batch recorded on an interrupted thread writes every outcome, and keeps the interrupt. */
  @Test
  public void batchRecordedOnAnInterruptedThreadWritesEveryOutcome() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String run = newKeyId();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      requests.add(IdempotencyRequest.of("interrupted-batch:" + run + ":" + i, LONG_RETENTION));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "n:" + item.key());
    }

    Batch.Recorded recorded;
    boolean interruptedAfterwards;
    try {
      beforeAnInterruptedOutcomeIsWritten();
      Thread.currentThread().interrupt();
      recorded = batch.record();
    } finally {
      interruptedAfterwards = Thread.interrupted();
    }

    assertThat(interruptedAfterwards).isTrue();
    assertThat(recorded.completed()).isEqualTo(5);
    assertThat(recorded.notRecorded()).isEmpty();
    assertThat(guard.claimBatch(requests, ResultCodec.string()).replayed()).hasSize(5);
  }

  /**
   * Called by the interrupt tests inside the sender, just before it sets its thread's interrupt
   * flag: a store's test makes the write that follows harder here (Redis: flush the scripts, so
   * that the completion has to load its script again).
   */
  protected void beforeAnInterruptedOutcomeIsWritten() {}

  /**
   * A send that outlives its window (a window from a short retry schedule, a slow provider) keeps
   * its record while its lease is renewed: a second caller polling all along finds it in progress
   * and never claims the key afresh, and the outcome is written.
   */
  @Test
  public void senderThatOutlivesItsWindowKeepsItsRecordAndItsOutcome() throws Exception {
    Duration lease = Duration.ofMillis(600);
    Duration window = Duration.ofMillis(1200);
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store()).lease(lease).inFlightWait(ZERO).build();
    IdempotencyGuard second =
        IdempotencyGuard.builder().store(store()).lease(lease).inFlightWait(ZERO).build();
    String key = "short-window:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<Outcome<String>> slow =
          startSlowSend(
              pool,
              sends,
              window.multipliedBy(2),
              sender ->
                  guard.executeForOutcome(
                      IdempotencyRequest.of(key, window), ResultCodec.string(), sender));
      int polls = 0;
      while (!slow.isDone()) {
        try {
          second.execute(key, window, ctx -> "second-" + sends.incrementAndGet());
        } catch (IdempotencyInProgressException expected) {
          polls++;
        }
        pause(20);
      }

      Outcome<String> outcome = slow.get(30, TimeUnit.SECONDS);
      assertThat(sends).as("the key was never claimed afresh under its live owner").hasValue(1);
      assertThat(polls).isGreaterThan(10);
      assertThat(outcome.value()).isEqualTo("slow");
      assertThat(outcome.recorded()).as("the record was still there to complete").isTrue();
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * Lease renewal does not queue behind other work: with the guard's blocking-store executor kept
   * busy for longer than several leases, a sender that runs three leases is still renewed and never
   * taken over.
   */
  @Test
  public void renewalDoesNotWaitForABusyStoreExecutor() throws Exception {
    ExecutorService busy = Executors.newSingleThreadExecutor();
    CountDownLatch release = new CountDownLatch(1);
    busy.execute(
        () -> {
          try {
            release.await(60, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store())
            .lease(RENEWED_LEASE)
            .inFlightWait(ZERO)
            .blockingStoreExecutor(busy)
            .build();
    IdempotencyGuard second =
        IdempotencyGuard.builder().store(store()).lease(RENEWED_LEASE).inFlightWait(ZERO).build();
    String key = "busy-executor:" + newKeyId();
    AtomicInteger sends = new AtomicInteger();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<String> slow =
          startSlowSend(
              pool,
              sends,
              RENEWED_LEASE.multipliedBy(3),
              sender -> guard.execute(key, LONG_RETENTION, sender));
      pollWhileRunning(second, key, slow, sends, 50);

      assertThat(slow.get(30, TimeUnit.SECONDS)).isEqualTo("slow");
      assertThat(sends).as("renewed although the store executor was busy").hasValue(1);
    } finally {
      release.countDown();
      pool.shutdownNow();
      busy.shutdownNow();
    }
  }

  /**
   * A completion the store applied but whose reply was lost (a timeout, a cut connection) is sent
   * again by its owner, and that repeat counts as written: the call reports its outcome recorded,
   * with no {@code OUTCOME_NOT_RECORDED} event and no warning that a repeat may send again.
   */
  @Test
  public void completionAppliedBeforeItsReplyWasLostIsRecorded() {
    AtomicInteger lostReplies = new AtomicInteger();
    KeyStore lossy =
        new ForwardingKeyStore(store()) {
          @Override
          public boolean complete(CompleteRequest request) {
            boolean written = delegate.complete(request);
            if (lostReplies.getAndIncrement() == 0) {
              throw new KeyStoreException("the reply was lost", null);
            }
            return written;
          }

          @Override
          public List<Boolean> completeAll(List<CompleteRequest> requests) {
            List<Boolean> written = delegate.completeAll(requests);
            if (lostReplies.getAndIncrement() == 0) {
              throw new KeyStoreException("the reply was lost", null);
            }
            return written;
          }
        };
    List<IdempotencyEvent.Type> events = new CopyOnWriteArrayList<>();
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(lossy).listener(event -> events.add(event.type())).build();

    Outcome<String> single =
        guard.executeForOutcome(
            IdempotencyRequest.of("lost-reply:" + newKeyId(), LONG_RETENTION),
            ResultCodec.string(),
            ctx -> "sent");
    lostReplies.set(0);
    String run = newKeyId();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of("lost-reply-batch:" + run + ":" + i, LONG_RETENTION));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "n:" + item.key());
    }
    Batch.Recorded recorded = batch.record();

    assertThat(single.recorded()).isTrue();
    assertThat(recorded.completed()).isEqualTo(3);
    assertThat(recorded.notRecorded()).isEmpty();
    assertThat(events).doesNotContain(IdempotencyEvent.Type.OUTCOME_NOT_RECORDED);
  }

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
   * Starts a guarded call on {@code pool} whose sender counts a send in {@code sends}, then runs
   * for {@code runs} of real time and returns {@code "slow"}; returns once that sender is running.
   */
  private static <R> Future<R> startSlowSend(
      ExecutorService pool,
      AtomicInteger sends,
      Duration runs,
      java.util.function.Function<dev.idempotency.Sender<String>, R> call)
      throws InterruptedException {
    CountDownLatch sending = new CountDownLatch(1);
    dev.idempotency.Sender<String> sender =
        ctx -> {
          sends.incrementAndGet();
          sending.countDown();
          awaitElapsed(System.nanoTime(), runs);
          return "slow";
        };
    Future<R> slow = pool.submit(() -> call.apply(sender));
    assertThat(sending.await(30, TimeUnit.SECONDS)).as("the slow sender started").isTrue();
    return slow;
  }

  /**
   * A second caller of {@code key} until {@code running} ends, every {@code pauseMillis}: each call
   * that is let through counts as a send in {@code sends}; returns how many found the key in
   * progress (held by the running caller, as it should be).
   */
  private static int pollWhileRunning(
      IdempotencyGuard guard,
      String key,
      Future<?> running,
      AtomicInteger sends,
      long pauseMillis) {
    int polls = 0;
    while (!running.isDone()) {
      try {
        guard.execute(key, LONG_RETENTION, ctx -> "second-" + sends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        polls++;
      }
      pause(pauseMillis);
    }
    return polls;
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
