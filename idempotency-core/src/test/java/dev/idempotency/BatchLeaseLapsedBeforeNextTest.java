package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 probe (probeH; SPEC 1) of fixbatch2's hand-out in {@code next()}: {@code hasNext()}
 * checks the key's lease and reserves it, {@code next()} hands it out. {@code toSend()}'s Javadoc
 * says a key "is handed out only while its lease has more than a quarter of its length left". A
 * loop that waits between {@code hasNext()} and {@code next()} (a rate limiter, a quota check) past
 * the lease: meanwhile another caller takes the lapsed key over and sends; {@code next()} must not
 * then hand the key out, or the batch sends it a second time within its window.
 *
 * <p>In-memory store, lease renewal off (a claim keeps the lease it got), the guard's clock moved
 * by hand. Found by probeH (failed 3 of 3 on 5fd63a8, and before fixbatch2); fixed: {@code next()}
 * checks the reserved key's lease again and lapses it if it ran out since {@code hasNext()}.
 */
class BatchLeaseLapsedBeforeNextTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(time)
          .lease(LEASE)
          .leaseRenewal(false)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  @Test
  void aKeyWhoseLeaseLapsedAfterHasNextIsNotHandedOutByNext() {
    String key = "batch-lapse-before-next:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    assertThat(toSend.hasNext()).as("the key is to send").isTrue();

    time.advance(LEASE.plusSeconds(1)); // the loop waited (a quota) past the lease
    String other = guard.execute(key, TTL, ctx -> "other-" + sends.incrementAndGet());
    assertThat(other).as("another caller took the lapsed key over and sent").isEqualTo("other-1");

    Batch.Item handedOut;
    try {
      handedOut = toSend.next();
    } catch (NoSuchElementException notHandedOut) {
      handedOut = null;
    }
    if (handedOut != null) {
      sends.incrementAndGet(); // the application sends what next() handed it
    }
    batch.record();
    assertThat(handedOut)
        .as("next() handed out a key whose lease lapsed after hasNext() (sends: %s)", sends.get())
        .isNull();
    assertThat(sends).hasValue(1);
  }
}
