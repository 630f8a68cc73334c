package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeG, issue 37, after 1bbf0a6; SPEC 1, 5, 9): a batch's key that was never given to the
 * application is taken back at {@code record()}, so that a batch's takeover keeps the earlier
 * owner's trace (attempt 2 in progress, lease ended; the next caller takes over as attempt 3). But
 * {@code toSend()}'s iterator marks a key handed out in {@code hasNext()}: a send loop that asks
 * {@code hasNext()} and then stops before {@code next()} (a quota or deadline check after it) has
 * the key it never received released with a fenced delete instead, which erases the taken-over
 * record: the next caller claims afresh as attempt 1, no takeover reported, while the first owner
 * (attempt 1, lapsed) may still be sending. Same setup as {@link BatchTakeoverNotHandedOutTest}.
 */
@org.junit.jupiter.api.Tag("open-finding")
class BatchHasNextOnlyTakeoverProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final CountDownLatch ownerMayFinish = new CountDownLatch(1);
  final IdempotencyGuard owner = guard();
  final IdempotencyGuard guard = guard();

  IdempotencyGuard guard() {
    return IdempotencyGuard.builder()
        .store(memory)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .closeGracePeriod(Duration.ofSeconds(5))
        .build();
  }

  @AfterEach
  void close() {
    ownerMayFinish.countDown();
    guard.close();
    owner.close();
  }

  @Test
  void aKeyOnlyLookedAtByHasNextIsTakenBackNotDeleted() throws Exception {
    String key = "batch-hasnext:" + UUID.randomUUID();
    String keyId = Digests.keyId(key);
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch ownerSending = new CountDownLatch(1);
    CompletableFuture<String> first =
        CompletableFuture.supplyAsync(
            () ->
                owner.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      ownerSending.countDown();
                      assertThat(ownerMayFinish.await(30, TimeUnit.SECONDS)).isTrue();
                      return "owner";
                    }));
    assertThat(ownerSending.await(30, TimeUnit.SECONDS)).isTrue();
    clock.advance(LEASE.plusSeconds(1)); // the owner stalled past its lease (store's view)

    try (Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string())) {
      assertThat(batch.claimedKeys()).as("the batch took the lapsed key over").containsExactly(key);
      java.util.Iterator<Batch.Item> toSend = batch.toSend().iterator();
      // a send loop that checks for more work and then stops (a quota, a deadline) before next()
      assertThat(toSend.hasNext()).isTrue();
      batch.record(); // the key was never given to the application: nothing sent under it
    }
    Optional<StoredRecord> left = memory.find(keyId, clock.instant());

    AtomicInteger nextAttempt = new AtomicInteger();
    guard.execute(
        key,
        TTL,
        ctx -> {
          nextAttempt.set(ctx.attempt());
          return "next-" + sends.incrementAndGet();
        });
    ownerMayFinish.countDown();
    first.get(30, TimeUnit.SECONDS);

    assertThat(left)
        .as("the record a batch's unsent takeover gave back: the owner's attempt 1 may have sent")
        .isPresent();
    assertThat(left.get().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(left.get().attempt()).isEqualTo(2);
    assertThat(left.get().leaseDeadline()).isBeforeOrEqualTo(clock.instant());
    assertThat(nextAttempt).as("attempt() of the next send (SPEC 9: counts takeovers)").hasValue(3);
    assertThat(sends).as("the owner's send and the takeover's").hasValue(2);
  }
}
