package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeT (SPEC 1): a loop reserves key a in {@code hasNext()} and waits (for a quota, as the
 * Javadoc of {@code BatchHandOut.stillLive} allows) before {@code next()}; meanwhile guard A closes
 * and its grace period passes (the reserved key counts as running, so the close waits for it, then
 * gives up and stops its lease keeper). {@code next()} then still hands a out: a send starts on a
 * lease nobody renews any more, which a single call never does ({@code SendLease.readyToSend}
 * refuses once the guard gave up, and {@code RenewNowDuringCloseProbeTest} checks the batch's
 * {@code hasNext()}). A send shorter than the lease but longer than what was left of it is then
 * taken over by guard B, which sends again. The rule: a key is handed out only while its lease can
 * be kept, so after the guard gave up the reserved key is lapsed (released at {@code record()}),
 * never sent.
 *
 * <p>In-memory store; lease 4 s, grace 200 ms; the guard's clock moved by hand.
 */
class BatchReservedKeyAfterCloseProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guardA =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .closeGracePeriod(Duration.ofMillis(200))
          .build();
  final IdempotencyGuard guardB =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guardA.close();
    guardB.close();
  }

  // probeT: failed on 5cfa0b8 (low: a second send; needs a loop that waits between hasNext() and
  // next() across a close of the guard past its grace period, and a send longer than what was left
  // of the lease), in-memory store: "[a sent once (B got: b-2)] Expecting AtomicInteger(2) to have
  // value: 1". FIXED: Batch.Item.markHandedOut refuses once the guard gave up; next() lapses the
  // key.
  @Test
  void aKeyReservedBeforeTheGuardGaveUpIsNotHandedOutAfter() throws Exception {
    String a = "batch-reserved-close-a:" + UUID.randomUUID();
    AtomicInteger aSends = new AtomicInteger();
    SoftAssertions softly = new SoftAssertions();
    Batch<String> batch =
        guardA.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    assertThat(toSend.hasNext()).as("a is reserved").isTrue();

    Thread closer = new Thread(guardA::close, "probeT-closer");
    closer.start();
    closer.join(30_000);
    assertThat(closer.isAlive()).as("close returned after its grace period").isFalse();

    clock.advance(Duration.ofMillis(2500)); // T0+2.5 s: 1.5 s of a's lease left, above the margin
    Batch.Item item;
    try {
      item = toSend.next();
    } catch (NoSuchElementException notHandedOut) {
      item = null;
    }
    if (item != null) {
      aSends.incrementAndGet(); // a's provider call starts, 2 s long (shorter than the lease)
      // a live guard's keeper renews a (a quarter lease, 1 s, after its claim): bounded wait
      Instant leaseBefore = guardB.find(a).orElseThrow().leaseExpiresAt();
      long until = System.nanoTime() + Duration.ofSeconds(3).toNanos();
      while (System.nanoTime() - until < 0
          && !guardB.find(a).orElseThrow().leaseExpiresAt().isAfter(leaseBefore)) {
        Thread.sleep(20);
      }
    } else {
      softly.assertThat(batch.lapsed()).as("a, not handed out, is lapsed").containsExactly(a);
    }
    clock.advance(Duration.ofMillis(2000)); // T0+4.5 s: a's send still runs
    String b;
    try {
      b = guardB.execute(a, TTL, ctx -> "b-" + aSends.incrementAndGet());
    } catch (IdempotencyInProgressException expected) {
      b = "in progress";
    }
    if (item != null) {
      batch.succeeded(item, "a-1");
    }
    batch.record();
    softly.assertThat(aSends).as("a sent once (B got: %s)", b).hasValue(1);
    softly.assertAll();
  }

  /** The same wait without the close: the keeper renews a while it is sent, B finds it running. */
  @Test
  void aKeyReservedAndHandedOutLaterIsRenewedWhileTheGuardIsOpen() throws Exception {
    String a = "batch-reserved-open-a:" + UUID.randomUUID();
    AtomicInteger aSends = new AtomicInteger();
    try (Batch<String> batch =
        guardA.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string())) {
      Iterator<Batch.Item> toSend = batch.toSend().iterator();
      assertThat(toSend.hasNext()).as("a is reserved").isTrue();
      clock.advance(Duration.ofMillis(2500));
      Batch.Item item = toSend.next();
      aSends.incrementAndGet();
      Instant leaseBefore = guardB.find(a).orElseThrow().leaseExpiresAt();
      long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
      while (System.nanoTime() - until < 0
          && !guardB.find(a).orElseThrow().leaseExpiresAt().isAfter(leaseBefore)) {
        Thread.sleep(20);
      }
      clock.advance(Duration.ofMillis(2000));
      assertThatThrownBy(() -> guardB.execute(a, TTL, ctx -> "b-" + aSends.incrementAndGet()))
          .isInstanceOf(IdempotencyInProgressException.class);
      batch.succeeded(item, "a-1");
    }
    assertThat(aSends).hasValue(1);
  }
}
