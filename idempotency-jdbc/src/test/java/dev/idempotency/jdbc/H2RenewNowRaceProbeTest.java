package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
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
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeB, suspicion 2, on H2 (a real database; the JDBC store on the guard's clock, its default):
 * the same race as core's {@code RenewNowRaceProbeTest}. JDBC's extend sets {@code lease_until =
 * :now + lease} from the request's time, so the keeper's renewal sent at T0 and landing after the
 * batch's own renewal at T0+2 s moves the row's lease back to T0+4 s while the guard believes T0+6
 * s and has handed the key out; guard B claims it at T0+4.5 s.
 *
 * <p>CONFIRMED on probeB: B takes the key over and sends while A's handed-out send is live: two
 * sends ("Expected: 1, Actual: 2"). Severity medium (see the core probe).
 *
 * <p>FIXED (fixcore): renewals of one claim never overlap; {@code LeaseKeeper.renewNow} waits for
 * the keeper's renewal on its way, then renews. The hand-out therefore runs on its own thread here:
 * the test lets the keeper's renewal land once the hand-out waits (or is done, as before the fix),
 * and checks that the batch's renewal went to the store only after it.
 */
class H2RenewNowRaceProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final JdbcKeyStore h2 = h2Store();
  final AtomicBoolean holdKeeper = new AtomicBoolean(true);
  final CountDownLatch keeperHeld = new CountDownLatch(1);
  final CountDownLatch letFirstGo = new CountDownLatch(1);
  final CountDownLatch firstLanded = new CountDownLatch(1);
  final CountDownLatch letOthersGo = new CountDownLatch(1);
  final AtomicInteger keeperRequests = new AtomicInteger();
  final AtomicBoolean handedOut = new AtomicBoolean();
  final AtomicBoolean batchRenewedBesideKeeper = new AtomicBoolean();

  final ForwardingKeyStore slowKeeperPath =
      new ForwardingKeyStore(h2) {
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
          .store(h2)
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

  private static JdbcKeyStore h2Store() {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:renew-now-race-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
    return JdbcKeyStore.builder(h2).tableName("renew_now_race").createSchemaIfMissing(true).build();
  }

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
