package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The guard when its clock and real time disagree, on a store that takes time from the guard: the
 * lease keeper schedules renewals by monotonic time, so a step of one host's wall clock never drops
 * a claim from renewal; and a batch writes what its guard's clock says is due before it hands out
 * the next key.
 */
class ClockStepTest {

  static final Duration TTL = Duration.ofHours(1);
  final KeyStore store = InMemoryKeyStore.builder().build();
  final ExecutorService pool = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  /** The system clock plus an offset that a test steps, as NTP steps one host's clock. */
  static final class SteppedClock extends Clock {
    final AtomicReference<Duration> offset = new AtomicReference<>(Duration.ZERO);

    void step(Duration by) {
      offset.updateAndGet(current -> current.plus(by));
    }

    @Override
    public Instant instant() {
      return Instant.now().plus(offset.get());
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      throw new UnsupportedOperationException();
    }
  }

  /**
   * This host's clock steps forward by two leases while its sender runs; another host's does not.
   * The keeper goes on renewing (on the stepped clock, which the store then holds), so the other
   * host never takes the live send over.
   */
  @Test
  void aForwardStepOfTheWallClockDoesNotDropAClaimFromRenewal() throws Exception {
    Duration lease = Duration.ofMillis(400);
    SteppedClock stepped = new SteppedClock();
    IdempotencyGuard thisHost =
        IdempotencyGuard.builder().store(store).lease(lease).clock(stepped).build();
    IdempotencyGuard otherHost =
        IdempotencyGuard.builder().store(store).lease(lease).inFlightWait(Duration.ZERO).build();
    String key = "step:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();

    Future<String> slow =
        pool.submit(
            () ->
                thisHost.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      stepped.step(lease.multipliedBy(2));
                      long until = System.nanoTime() + lease.multipliedBy(4).toNanos();
                      while (System.nanoTime() < until) {
                        Thread.sleep(10); // a send that outlives its lease: under test
                      }
                      return "slow";
                    }));
    await(() -> sends.get() == 1, "the send to start");
    int polls = 0;
    while (!slow.isDone()) {
      try {
        otherHost.execute(key, TTL, ctx -> "other-" + sends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        polls++;
      }
      Thread.sleep(20); // the other host's pace of repeats while the send runs
    }

    assertThat(slow.get(30, TimeUnit.SECONDS)).isEqualTo("slow");
    assertThat(sends).as("the other host never took the live send over").hasValue(1);
    assertThat(polls).isGreaterThan(10);
  }

  /**
   * A batch that runs longer than its lease while its guard's clock runs ahead of the keeper's
   * real-time period (here a test clock; in production a forward step): each send takes two thirds
   * of a lease by that clock and the keeper never gets to renew. Before each hand-out the batch
   * renews what would lapse before the next send could end and writes what was reported, so another
   * worker, checking every key after every send, never takes one over.
   */
  @Test
  void aBatchWhoseSendsOutpaceTheKeeperRenewsAheadAndSendsNoKeyTwice() {
    Duration lease = Duration.ofSeconds(30);
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    IdempotencyGuard first =
        IdempotencyGuard.builder().store(store).lease(lease).clock(clock).build();
    IdempotencyGuard second =
        IdempotencyGuard.builder()
            .store(store)
            .lease(lease)
            .clock(clock)
            .inFlightWait(Duration.ZERO)
            .build();
    String run = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      requests.add(IdempotencyRequest.of("clock-batch:" + run + ":" + i, TTL));
    }
    java.util.Map<String, AtomicInteger> sends = new java.util.concurrent.ConcurrentHashMap<>();
    requests.forEach(request -> sends.put(request.key(), new AtomicInteger()));

    Batch<String> batch = first.claimBatch(requests, ResultCodec.string());
    int handedOut = 0;
    for (Batch.Item item : batch.toSend()) {
      handedOut++;
      sends.get(item.key()).incrementAndGet();
      clock.advance(lease.multipliedBy(2).dividedBy(3)); // the send, by the guard's clock
      batch.succeeded(item, "first");
      for (IdempotencyRequest request : requests) {
        try {
          second.execute(
              request.key(),
              TTL,
              ctx -> {
                sends.get(request.key()).incrementAndGet();
                return "second";
              });
        } catch (IdempotencyInProgressException stillHeld) {
          // the batch holds it: as it should
        }
      }
    }
    batch.record();

    assertThat(handedOut).isEqualTo(5);
    assertThat(sends.values()).allSatisfy(count -> assertThat(count).hasValue(1));
    for (IdempotencyRequest request : requests) {
      assertThat(second.execute(request.key(), TTL, ctx -> "again")).isEqualTo("first");
    }
  }

  /**
   * A batch whose guard's clock runs ahead of real time (a step, a test clock): an outcome reported
   * before the jump is written before the next key is handed out, so another worker finds it
   * completed rather than a lapsed lease to take over; the keys still waiting are renewed then too,
   * so the next one is handed out.
   */
  @Test
  void aBatchWritesWhatItsClockSaysIsDueBeforeHandingOutTheNextKey() {
    Duration lease = Duration.ofMinutes(1);
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    IdempotencyGuard first =
        IdempotencyGuard.builder().store(store).lease(lease).clock(clock).build();
    IdempotencyGuard second =
        IdempotencyGuard.builder()
            .store(store)
            .lease(lease)
            .clock(clock)
            .inFlightWait(Duration.ZERO)
            .build();
    String run = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of("clock-batch:" + run + ":" + i, TTL));
    }
    AtomicInteger secondSends = new AtomicInteger();

    Batch<String> batch = first.claimBatch(requests, ResultCodec.string());
    var toSend = batch.toSend().iterator();
    Batch.Item item = toSend.next();
    batch.succeeded(item, "first");
    clock.advance(lease.multipliedBy(8).dividedBy(10));
    boolean more = toSend.hasNext();
    clock.advance(lease.multipliedBy(3).dividedBy(10));
    String seen = second.execute(item.key(), TTL, ctx -> "second-" + secondSends.incrementAndGet());
    Batch.Recorded recorded = batch.record();

    assertThat(seen).as("written before the next hand-out, so replayed").isEqualTo("first");
    assertThat(secondSends).hasValue(0);
    assertThat(more).as("the waiting keys were renewed before the next hand-out").isTrue();
    assertThat(batch.lapsed()).isEmpty();
    assertThat(recorded.completed()).isEqualTo(1);
    assertThat(recorded.released()).isEqualTo(2);
  }
}
