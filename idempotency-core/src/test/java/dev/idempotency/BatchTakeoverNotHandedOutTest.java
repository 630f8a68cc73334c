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
 * Issue 37 (SPEC 1, 5, 9; fixtakeover noticed it): a batch that took a lapsed lease over (attempt
 * 2) and never handed that key out gives it back when it is recorded. A fenced delete would erase
 * the trace of the first owner's attempt 1, whose send may still run: the next caller would claim
 * afresh as attempt 1, no takeover reported, and send beside the first owner. Nothing was sent
 * under the batch's claim, so it is taken back ({@link dev.idempotency.spi.KeyStore#takeBack}): the
 * record stays {@code IN_PROGRESS} at attempt 2 with its lease passed, and the next caller takes
 * over as attempt 3. In-memory store, the guards' clock moved by hand.
 */
class BatchTakeoverNotHandedOutTest {

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
  void aBatchTakeoverNeverHandedOutLeavesTheNextCallerATakeover() throws Exception {
    String key = "batch-takeover:" + UUID.randomUUID();
    String keyId = Digests.keyId(key);
    AtomicInteger sends = new AtomicInteger();
    CompletableFuture<String> first = StalledOwners.sending(owner, key, TTL, sends, ownerMayFinish);
    clock.advance(LEASE.plusSeconds(1)); // the owner stalled past its lease (store's view)

    try (Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string())) {
      assertThat(batch.claimedKeys()).as("the batch took the lapsed key over").containsExactly(key);
      batch.record(); // nothing handed out, nothing sent
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
