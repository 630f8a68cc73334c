package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The guard's promises on a store about leases, where time passes for real: a sender that outlives
 * its lease (or its window) is renewed and never taken over, a claim answered late is renewed
 * before the send or not sent on, and renewals do not wait for a busy store executor. Part of
 * {@link GuardOnStoreContract}; extend that one.
 */
public abstract class GuardLeaseContract extends StoreContractSupport {

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
   * Starts a guarded call on {@code pool} whose sender counts a send in {@code sends}, then runs
   * for {@code runs} of real time and returns {@code "slow"}; returns once that sender is running.
   */
  static <R> Future<R> startSlowSend(
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
  static int pollWhileRunning(
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
}
