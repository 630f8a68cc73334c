package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO (SPEC 1), after f751285: a batch key already handed out, whose renewal fails at two
 * hand-outs in a row (k2's, then k3's check) and at the keeper's next round too, is still renewed
 * by the keeper once the store answers again ({@code LeaseKeeper.renewStartedNow} leaves it, never
 * lost); the keys whose renewal failed before their hand-out (k2, k3) are not handed out. Another
 * guard asking for k1 after its first lease would have run out finds it in progress.
 *
 * <p>In-memory store behind one that fails the next renewals while told to; lease 4 s, guard clock
 * moved by hand, the keeper on real time (rounds every second).
 */
class BatchHandOutRenewalFailsTwiceProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicInteger failuresLeft = new AtomicInteger();
  final AtomicInteger failed = new AtomicInteger();
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final KeyStore failing =
      new ForwardingKeyStore(memory) {
        @Override
        public boolean extend(ExtendRequest request) {
          failIfAsked();
          return delegate.extend(request);
        }

        @Override
        public List<Boolean> extendAll(List<ExtendRequest> requests) {
          failIfAsked();
          return delegate.extendAll(requests);
        }

        private void failIfAsked() {
          if (failuresLeft.getAndUpdate(left -> Math.max(0, left - 1)) > 0) {
            failed.incrementAndGet();
            throw new KeyStoreException("the store did not answer in time", null);
          }
        }
      };
  final IdempotencyGuard guardA = guard(failing);
  final IdempotencyGuard guardB = guard(memory);

  IdempotencyGuard guard(KeyStore store) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void close() {
    guardA.close();
    guardB.close();
  }

  @Test
  void aKeyBeingSentIsRenewedAfterItsRenewalFailedAtTwoHandOutsAndOneRound()
      throws InterruptedException {
    String k1 = "batch-fails-twice-1:" + UUID.randomUUID();
    String k2 = "batch-fails-twice-2:" + UUID.randomUUID();
    String k3 = "batch-fails-twice-3:" + UUID.randomUUID();
    AtomicInteger k1Sends = new AtomicInteger();
    String b;
    try (Batch<String> batch =
        guardA.claimBatch(
            List.of(
                IdempotencyRequest.of(k1, TTL),
                IdempotencyRequest.of(k2, TTL),
                IdempotencyRequest.of(k3, TTL)),
            ResultCodec.string())) {
      Iterator<Batch.Item> toSend = batch.toSend().iterator();
      assertThat(toSend.hasNext()).isTrue();
      Batch.Item first = toSend.next();
      assertThat(first.key()).isEqualTo(k1);
      k1Sends.incrementAndGet(); // k1's provider call starts, on another thread

      clock.advance(Duration.ofMillis(3500));
      // both hand-out checks fail: k2's (two calls: k2 and k3 not handed out, k1 being sent), then
      // k3's (k1 again); and so does the next renewal, the keeper's
      failuresLeft.set(4);
      boolean anotherHandedOut = toSend.hasNext();
      assertThat(anotherHandedOut)
          .as("k2 and k3, whose renewals failed, are not handed out")
          .isFalse();
      assertThat(failed.get())
          .as("renewals failed at the two hand-outs (and a keeper round, if one came)")
          .isGreaterThanOrEqualTo(3);

      // real time passes while k1's send runs: bounded wait for the keeper to renew k1
      Instant leaseBefore = guardB.find(k1).orElseThrow().leaseExpiresAt();
      long until = System.nanoTime() + Duration.ofSeconds(6).toNanos();
      while (System.nanoTime() - until < 0
          && !guardB.find(k1).orElseThrow().leaseExpiresAt().isAfter(leaseBefore)) {
        Thread.sleep(20);
      }
      clock.advance(Duration.ofMillis(1500)); // T0+5 s: k1's send still runs
      try {
        b = guardB.execute(k1, TTL, ctx -> "b-" + k1Sends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        b = "in progress";
      }
      batch.succeeded(first, "a-1");
      Batch.Recorded recorded = batch.record();
      assertThat(recorded.completed()).as("k1's outcome recorded").isEqualTo(1);
      assertThat(batch.lapsed()).containsExactlyInAnyOrder(k2, k3);
    }
    assertThat(failed).as("the keeper's round failed once too").hasValue(4);
    assertThat(k1Sends).as("k1 sent once (B got: %s)", b).hasValue(1);
    assertThat(guardB.execute(k1, TTL, ctx -> "c")).isEqualTo("a-1");
  }
}
