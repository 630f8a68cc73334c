package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A batch renewing a key before it hands it out must not race the lease keeper's own renewal of the
 * same claim (SPEC 1), on a store whose extend sets the lease from the request's time (in memory,
 * JDBC on the guard's clock, DynamoDB: "an older one landing late moves it back").
 *
 * <p>probeB, suspicion 2: {@code LeaseKeeper.renewNow} (a batch renewing before a hand-out, {@code
 * BatchLeases.renewBefore}) did not take the claim's renewal flag ({@code Claim.startRenewal}), so
 * it could run while the keeper's renewal of the same claim was on its way to the store. Each
 * renewal sets the lease to <em>its own</em> request time plus the lease, while the guard keeps the
 * later estimate ({@code Claim.renewed} ignores the older answer). If the keeper's older request
 * lands after the batch's, the store's lease ends earlier than the guard believes.
 *
 * <p>Here: the store under test behind a forwarding store that holds guard A's keeper renewals (a
 * slow path to the store for those requests: sent before, answered after the batch's own renewal);
 * the guard's clock moved by hand, as {@code BatchLeases} is written for. Lease 4 s. Key 2 is
 * renewed by the batch at T0+2 s (store and guard: T0+6 s), then the keeper's renewal sent at T0
 * lands: before the fix the store's lease was T0+4 s, the guard still thought T0+6 s and had handed
 * key 2 out. At T0+4.5 s (key 2's send has run 2.5 s, less than the lease, the guard's estimate has
 * 1.5 s left) guard B claims key 2.
 *
 * <p>CONFIRMED on probeB (1157db4), in memory, on H2 and on DynamoDB: guard B took key 2 over and
 * sent while A's handed-out send was live: two sends of one key, no crash, no pause of A. Severity
 * medium: needs a keeper renewal that is slower than the batch's own renewal of the same key, after
 * which the store's lease is earlier than the guard's estimate by up to that delay; with a
 * real-time clock the keeper's next renewal usually heals it (a quarter lease later), so a
 * duplicate needs a renewal delay above about a quarter lease. Failure: "sends of key 2 [...]
 * Expected: 1, Actual: 2".
 *
 * <p>The fix it guards (fixcore): renewals of one claim never overlap; {@code LeaseKeeper.renewNow}
 * waits for the keeper's renewal on its way, then renews. The hand-out therefore runs on its own
 * thread here: the test lets the keeper's renewal land once the hand-out waits (or is done, as
 * before the fix), and checks that the batch's renewal went to the store only after it.
 *
 * <p>Extend it with a store on request time (not {@link KeyStore#usesServerTime() server time}):
 * implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if the store holds resources.
 */
public abstract class RenewNowRaceContract {

  /** The idempotency window of both keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  /** The guards' lease. */
  protected static final Duration LEASE = Duration.ofSeconds(4);

  private static final Duration WAIT_LIMIT = Duration.ofSeconds(60);

  private final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  private final AtomicBoolean holdKeeper = new AtomicBoolean(true);
  private final CountDownLatch keeperHeld = new CountDownLatch(1);
  private final CountDownLatch letFirstGo = new CountDownLatch(1);
  private final CountDownLatch firstLanded = new CountDownLatch(1);
  private final CountDownLatch letOthersGo = new CountDownLatch(1);
  private final AtomicInteger keeperRequests = new AtomicInteger();
  private final AtomicBoolean handedOut = new AtomicBoolean();
  private final AtomicBoolean batchRenewedBesideKeeper = new AtomicBoolean();

  private KeyStore store;
  private IdempotencyGuard guardA;
  private IdempotencyGuard guardB;

  /** For subclasses. */
  protected RenewNowRaceContract() {}

  /**
   * A new store for one test, ready to answer; the lease it writes on extend comes from the
   * request's time.
   *
   * @return the store
   */
  protected abstract KeyStore newStore();

  /**
   * Releases what the store from {@link #newStore()} holds, after both guards are closed; nothing
   * by default.
   *
   * @param store the store of the test
   */
  protected void closeStore(KeyStore store) {}

  /** Makes the store and the two guards on it: A through the slow keeper path, B directly. */
  @BeforeEach
  protected void startGuards() {
    store = newStore();
    guardA =
        IdempotencyGuard.builder()
            .store(slowKeeperPath(store))
            .clock(time)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .build();
    guardB =
        IdempotencyGuard.builder()
            .store(store)
            .clock(time)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .build();
  }

  /** Lets every held renewal go, closes both guards, then the store. */
  @AfterEach
  protected void closeGuards() {
    holdKeeper.set(false);
    letFirstGo.countDown();
    letOthersGo.countDown();
    if (guardA != null) {
      guardA.close();
    }
    if (guardB != null) {
      guardB.close();
    }
    if (store != null) {
      closeStore(store);
    }
  }

  /**
   * The batch's renewal of key 2 before its hand-out, and the keeper's older renewal landing after
   * it, do not let guard B take over the handed-out key while A's send is live.
   *
   * @throws Exception if the hand-out or a wait fails
   */
  @Test
  public void anOlderKeeperRenewalLandingAfterTheBatchsOwnDoesNotLetAHandedOutKeyBeTakenOver()
      throws Exception {
    String prefix = "renew-now-race:" + UUID.randomUUID() + ":";
    String key1 = prefix + "1";
    String key2 = prefix + "2";
    AtomicInteger sends2 = new AtomicInteger();
    Batch<String> batch =
        guardA.claimBatch(
            List.of(IdempotencyRequest.of(key1, TTL), IdempotencyRequest.of(key2, TTL)),
            ResultCodec.string());
    assertThat(batch.claimedKeys()).containsExactlyInAnyOrder(key1, key2);
    assertThat(keeperHeld.await(30, TimeUnit.SECONDS))
        .as("the keeper sent its renewal (request time T0)")
        .isTrue();

    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    Batch.Item first = toSend.next();
    time.advance(Duration.ofSeconds(2)); // key 1's send takes 2 s
    batch.succeeded(first, "sent-" + first.key());
    // the batch renews key 2 at T0+2 s before handing it out, on another thread: with renewals of
    // a claim serialised it waits for the keeper's renewal still on its way
    ExecutorService handOutThread =
        Executors.newSingleThreadExecutor(r -> new Thread(r, "hand-out"));
    Batch.Item second;
    try {
      AtomicReference<Thread> handingOut = new AtomicReference<>();
      Future<Batch.Item> handOut =
          handOutThread.submit(
              () -> {
                handingOut.set(Thread.currentThread());
                Batch.Item next = toSend.next();
                handedOut.set(true);
                return next;
              });
      awaitDoneOrWaiting(handOut, handingOut);
      letFirstGo.countDown(); // the keeper's renewal sent at T0 lands now
      assertThat(firstLanded.await(30, TimeUnit.SECONDS)).isTrue();
      second = handOut.get(60, TimeUnit.SECONDS);
    } finally {
      handOutThread.shutdown();
    }
    assertThat(second.key()).isEqualTo(key2);
    sends2.incrementAndGet(); // A sends key 2 (its send runs until the end of the test)

    time.advance(Duration.ofMillis(2_500)); // T0+4.5 s: A's key 2 send has run 2.5 s < lease
    String b;
    try {
      b = guardB.execute(key2, TTL, ctx -> "b-" + sends2.incrementAndGet());
    } catch (IdempotencyInProgressException inProgress) {
      b = "in progress";
    }
    batch.succeeded(second, "a-sent");
    holdKeeper.set(false);
    letOthersGo.countDown();
    batch.record();

    assertThat(sends2)
        .as(
            "sends of key 2 (A handed it out at T0+2 s with a lease it believed ends at T0+6 s;"
                + " B at T0+4.5 s got: %s)",
            b)
        .hasValue(1);
    assertThat(batchRenewedBesideKeeper)
        .as("the batch renewed key 2 while the keeper's older renewal was on its way")
        .isFalse();
  }

  /**
   * The store as guard A sees it: the keeper's first renewal is held until the test lets it land,
   * its later ones (after the hand-out) until the end of the test; any other renewal sent while the
   * first is held is recorded as beside it.
   */
  private ForwardingKeyStore slowKeeperPath(KeyStore target) {
    return new ForwardingKeyStore(target) {
      @Override
      public List<Boolean> extendAll(List<ExtendRequest> requests) {
        if (!Thread.currentThread().getName().contains("lease-keeper") || !holdKeeper.get()) {
          if (keeperHeld.getCount() == 0 && firstLanded.getCount() == 1) {
            batchRenewedBesideKeeper.set(true);
          }
          return delegate.extendAll(requests);
        }
        if (keeperRequests.get() >= 1 && !handedOut.get()) {
          // a later keeper round before the hand-out: passes (it would only delay the hand-out)
          return delegate.extendAll(requests);
        }
        int n = keeperRequests.incrementAndGet();
        if (n == 1) {
          keeperHeld.countDown();
          await(letFirstGo);
          List<Boolean> moved = delegate.extendAll(requests);
          firstLanded.countDown();
          return moved;
        }
        await(letOthersGo); // the keeper's later requests: held until the end of the test
        return delegate.extendAll(requests);
      }
    };
  }

  /** Waits, bounded, until the hand-out is done, or its thread waits (for the keeper's renewal). */
  private static void awaitDoneOrWaiting(
      Future<Batch.Item> handOut, AtomicReference<Thread> handingOut) throws InterruptedException {
    long deadline = System.nanoTime() + WAIT_LIMIT.toNanos();
    while (!(handOut.isDone()
        || (handingOut.get() != null && handingOut.get().getState() == Thread.State.WAITING))) {
      assertThat(System.nanoTime() - deadline < 0)
          .as("the hand-out done, or waiting, within " + WAIT_LIMIT)
          .isTrue();
      Thread.sleep(20);
    }
  }

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
