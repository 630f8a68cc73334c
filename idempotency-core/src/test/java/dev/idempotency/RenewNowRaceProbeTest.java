package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
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
import org.junit.jupiter.api.Test;

/**
 * probeB, suspicion 2 (SPEC 1): {@code LeaseKeeper.renewNow} (a batch renewing before a hand-out,
 * {@code BatchLeases.renewBefore}) does not take the claim's renewal flag ({@code
 * Claim.startRenewal}), so it can run while the keeper's own renewal of the same claim is on its
 * way to the store. Each renewal sets the lease to <em>its own</em> request time plus the lease (in
 * memory, JDBC with client time, DynamoDB: "an older one landing late moves it back"), while the
 * guard keeps the later estimate ({@code Claim.renewed} ignores the older answer). If the keeper's
 * older request lands after the batch's, the store's lease ends earlier than the guard believes.
 *
 * <p>Here: in-memory store (a real store) behind a forwarding store that holds guard A's keeper
 * renewals (a slow path to the store for those requests: sent before, answered after the batch's
 * own renewal); the guard's clock moved by hand, as {@code BatchLeases} is written for. Lease 4 s.
 * Key 2 is renewed by the batch at T0+2 s (store and guard: T0+6 s), then the keeper's renewal sent
 * at T0 lands: the store's lease is T0+4 s, the guard still thinks T0+6 s and has handed key 2 out.
 * At T0+4.5 s (key 2's send has run 2.5 s, less than the lease, the guard's estimate has 1.5 s
 * left) guard B claims key 2.
 *
 * <p>CONFIRMED on probeB (1157db4): guard B takes key 2 over and sends while A's handed-out send is
 * live: two sends of one key, no crash, no pause of A. Severity medium: needs a keeper renewal that
 * is slower than the batch's own renewal of the same key, after which the store's lease is earlier
 * than the guard's estimate by up to that delay; with a real-time clock the keeper's next renewal
 * usually heals it (a quarter lease later), so a duplicate needs a renewal delay above about a
 * quarter lease. Failure: "sends of key 2 [...] Expected: 1, Actual: 2".
 *
 * <p>FIXED (fixcore): renewals of one claim never overlap; {@code LeaseKeeper.renewNow} waits for
 * the keeper's renewal on its way, then renews. The hand-out therefore runs on its own thread here:
 * the test lets the keeper's renewal land once the hand-out waits (or is done, as before the fix),
 * and checks that the batch's renewal went to the store only after it.
 */
class RenewNowRaceProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final AtomicBoolean holdKeeper = new AtomicBoolean(true);
  final CountDownLatch keeperHeld = new CountDownLatch(1);
  final CountDownLatch letFirstGo = new CountDownLatch(1);
  final CountDownLatch firstLanded = new CountDownLatch(1);
  final CountDownLatch letOthersGo = new CountDownLatch(1);
  final AtomicInteger keeperRequests = new AtomicInteger();
  final AtomicBoolean handedOut = new AtomicBoolean();
  final AtomicBoolean batchRenewedBesideKeeper = new AtomicBoolean();

  final ForwardingKeyStore slowKeeperPath =
      new ForwardingKeyStore(memory) {
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

  final IdempotencyGuard guardA =
      IdempotencyGuard.builder()
          .store(slowKeeperPath)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();
  final IdempotencyGuard guardB =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(time)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    holdKeeper.set(false);
    letFirstGo.countDown();
    letOthersGo.countDown();
    guardA.close();
    guardB.close();
  }

  @Test
  void anOlderKeeperRenewalLandingAfterTheBatchsOwnDoesNotLetAHandedOutKeyBeTakenOver()
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
      Poll.within(Duration.ofSeconds(60))
          .until(
              "the hand-out done, or waiting",
              () ->
                  handOut.isDone()
                      || (handingOut.get() != null
                          && handingOut.get().getState() == Thread.State.WAITING));
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

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
