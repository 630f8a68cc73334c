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
 * Issue 37 (probeG; SPEC 1, 5, 9): a key counts as handed out only once {@code next()} returned it.
 * A send loop that asks {@code hasNext()} and then stops before {@code next()} (a quota or deadline
 * check after it) never received the key, so nothing was sent under the batch's claim: {@code
 * record()} takes it back ({@link dev.idempotency.spi.KeyStore#takeBack}) instead of deleting it.
 * When the batch's claim was a takeover, a fenced delete would erase the record: the next caller
 * would claim afresh as attempt 1, no takeover reported, while the first owner (attempt 1, lapsed)
 * may still be sending. Same setup as {@link BatchTakeoverNotHandedOutTest}; the clock is moved by
 * hand.
 */
class BatchHasNextOnlyTakeoverTest {

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
    CompletableFuture<String> first = StalledOwners.sending(owner, key, TTL, sends, ownerMayFinish);
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

  /** Iterating again hands out a key an earlier iteration only looked at (docs: toSend()). */
  @Test
  void aKeyOnlyLookedAtIsHandedOutWhenIteratingAgain() {
    String key = "batch-hasnext-again:" + UUID.randomUUID();
    try (Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string())) {
      assertThat(batch.toSend().iterator().hasNext()).isTrue(); // looked at, never received
      java.util.Iterator<Batch.Item> again = batch.toSend().iterator();
      Batch.Item item = again.next();
      assertThat(item.key()).isEqualTo(key);
      assertThat(again.hasNext()).isFalse();
      batch.succeeded(item, "sent-once");
      assertThat(batch.record().completed()).isEqualTo(1);
    }
    assertThat(guard.execute(key, TTL, ctx -> "sent-twice")).isEqualTo("sent-once");
  }
}
