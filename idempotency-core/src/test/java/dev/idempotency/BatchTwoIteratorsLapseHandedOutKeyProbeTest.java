package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO (SPEC 1): two iterations of one batch's {@code toSend()} (documented: "several iterations
 * may run at once") both reserve key a in {@code hasNext()}; the second hands it out and its send
 * runs; the first waits (for a quota, as the Javadoc of {@code stillLive} allows) and then calls
 * {@code next()}, whose check renews a (already handed out: {@code renewStartedNow}, not lost on a
 * failure) and, the store failing that renewal, finds a's lease too short and lapses it ({@code
 * BatchHandOut.stillLive}: {@code stopRunning}, then LAPSED), although the other iteration handed
 * it out. A LAPSED key is never renewed by the keeper ({@code BatchKeeperWatch.collectDue} renews
 * NEW and REPORTED keys), so a's lease runs out under its running send and another guard sends it
 * again; {@code lapsed()} lists it as "not sent", and the guard no longer counts it as running.
 *
 * <p>No clock step: the guard's clock only moves forward. One store failure at a hand-out is enough
 * (the case {@code BatchFailedRenewalLosesSendingItemProbeTest}'s fix covers for a single
 * iteration). In-memory store behind one that fails renewals while told to; lease 8 s, the guard
 * clock moved by hand, the keeper on real time; both iterations on the test's thread, in turn.
 */
class BatchTwoIteratorsLapseHandedOutKeyProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(8);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicBoolean failRenewals = new AtomicBoolean();
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
          if (failRenewals.get()) {
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

  // probeO: failed on feb9e77 (medium: a second send; a batch iterated by two loops at once, one
  // waiting between hasNext() and next(), one store failure at that next()), in-memory store: "[a
  // sent once (B got: b-2)] Expecting AtomicInteger(2) to have value: 1" and "[a key handed out is
  // not lapsed] Expecting ... not to contain ...". FIXED: BatchHandOut.lapse never lapses a key
  // another iteration handed out (under the item's monitor, as markHandedOut).
  @Test
  void aKeyHandedOutByOneIterationIsNotLapsedByAnother() throws Exception {
    String a = "batch-two-iterations-a:" + UUID.randomUUID();
    AtomicInteger aSends = new AtomicInteger();
    SoftAssertions softly = new SoftAssertions();
    String b;
    try (Batch<String> batch =
        guardA.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string())) {
      clock.advance(Duration.ofSeconds(1));
      Iterator<Batch.Item> waiting = batch.toSend().iterator();
      assertThat(waiting.hasNext()).as("the first iteration reserves a").isTrue();

      Iterator<Batch.Item> sending = batch.toSend().iterator();
      assertThat(sending.hasNext()).as("the second iteration reserves a too").isTrue();
      Batch.Item item = sending.next();
      assertThat(item.key()).isEqualTo(a);
      aSends.incrementAndGet(); // a's provider call starts

      clock.advance(Duration.ofMillis(5500)); // T0+6.5 s: the first iteration waited for a quota
      failRenewals.set(true); // the store fails the renewal of its check
      Throwable firstNext = catchThrowable(waiting::next);
      failRenewals.set(false);
      assertThat(firstNext)
          .as("nothing left for the first iteration")
          .isInstanceOf(NoSuchElementException.class);

      // real time passes while a's send runs: the keeper renews a (due 2 s after its claim)
      // unless it stopped; bounded wait
      Instant leaseBefore = guardB.find(a).orElseThrow().leaseExpiresAt();
      long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (System.nanoTime() - until < 0
          && !guardB.find(a).orElseThrow().leaseExpiresAt().isAfter(leaseBefore)) {
        Thread.sleep(20);
      }
      clock.advance(Duration.ofMillis(2500)); // T0+9 s: a's send still runs
      try {
        b = guardB.execute(a, TTL, ctx -> "b-" + aSends.incrementAndGet());
      } catch (IdempotencyInProgressException expected) {
        b = "in progress";
      }
      softly
          .assertThat(batch.lapsed())
          .as("a key handed out is not lapsed (lapsed keys 'were not sent')")
          .doesNotContain(a);
      batch.succeeded(item, "a-1");
      batch.record();
    }
    softly.assertThat(aSends).as("a sent once (B got: %s)", b).hasValue(1);
    softly.assertAll();
  }
}
