package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (found by probeG; SPEC 1, 5, 9): a take-back of a takeover ends the claim's owner token
 * along with its lease. A renewal of that same token already on its way to the store (the lease
 * keeper's round had collected the batch's claim before {@code record()} unwatched it) lands after
 * the take-back and is refused by the owner-token fence, so it cannot give the lapsed lease a new
 * full lease: the next caller takes over at once as attempt 3 (guarantees.md's take-back table)
 * instead of getting {@link IdempotencyInProgressException} for a lease with nothing sent. Before
 * the fix the take-back kept the token and the renewal revived the claim. A first attempt is
 * deleted by its take-back, so a late renewal finds nothing; only takeovers were affected.
 *
 * <p>In-memory store; the only test device is a forwarding face that holds the keeper's renewal of
 * the batch's key until the take-back has been applied (bounded), which orders the race.
 */
class TakeBackUndoneByRenewalTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final CountDownLatch extendEntered = new CountDownLatch(1);
  final CountDownLatch takeBackDone = new CountDownLatch(1);
  final CountDownLatch extendReturned = new CountDownLatch(1);
  final AtomicReference<String> gatedKeyId = new AtomicReference<>();
  final AtomicInteger extendsAfterTakeBack = new AtomicInteger();

  final ForwardingKeyStore gated =
      new ForwardingKeyStore(memory) {
        @Override
        public boolean extend(ExtendRequest request) {
          if (!request.keyId().equals(gatedKeyId.get()) || extendEntered.getCount() == 0) {
            return super.extend(request);
          }
          extendEntered.countDown();
          try {
            // bounded: if record() cannot take back while this renewal is out, the race is ordered
            // the other way and the test holds
            if (takeBackDone.await(10, TimeUnit.SECONDS)) {
              extendsAfterTakeBack.incrementAndGet();
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          try {
            return super.extend(request);
          } finally {
            extendReturned.countDown();
          }
        }

        @Override
        public boolean takeBack(String keyId, String ownerToken, Instant now) {
          try {
            return super.takeBack(keyId, ownerToken, now);
          } finally {
            takeBackDone.countDown();
          }
        }
      };

  final CountDownLatch ownerMayFinish = new CountDownLatch(1);
  // the first owner's guard runs ten minutes behind: its lease has lapsed on the real clock
  final IdempotencyGuard owner =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(new MutableClock(Instant.now().minus(Duration.ofMinutes(10))))
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(gated)
          .clock(Clock.systemUTC())
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .closeGracePeriod(Duration.ofSeconds(5))
          .build();

  @AfterEach
  void close() {
    ownerMayFinish.countDown();
    takeBackDone.countDown();
    guard.close();
    owner.close();
  }

  @Test
  void aRenewalInFlightDoesNotUndoTheTakeBackOfABatchTakeover() throws Exception {
    String key = "take-back-renewal:" + UUID.randomUUID();
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
                      assertThat(ownerMayFinish.await(60, TimeUnit.SECONDS)).isTrue();
                      return "owner";
                    }));
    assertThat(ownerSending.await(30, TimeUnit.SECONDS)).isTrue();

    gatedKeyId.set(keyId);
    try (Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string())) {
      assertThat(batch.claimedKeys()).as("the batch took the lapsed key over").containsExactly(key);
      assertThat(extendEntered.await(30, TimeUnit.SECONDS))
          .as("the keeper renews the batch's key")
          .isTrue();
      batch.record(); // nothing handed out, nothing sent: taken back
    }
    assertThat(extendReturned.await(30, TimeUnit.SECONDS)).isTrue();
    Optional<StoredRecord> left = memory.find(keyId, Instant.now());

    AtomicReference<Object> next = new AtomicReference<>();
    try {
      guard.execute(
          key,
          TTL,
          ctx -> {
            next.set("attempt " + ctx.attempt());
            return "next-" + sends.incrementAndGet();
          });
    } catch (IdempotencyException e) {
      next.set(e.getClass().getSimpleName());
    }

    assertThat(extendsAfterTakeBack).as("the renewal landed after the take-back").hasValue(1);
    assertThat(left).isPresent();
    assertThat(left.get().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(left.get().attempt()).isEqualTo(2);
    assertThat(next.get())
        .as("the next caller after the take-back (guarantees.md: takes it over at once)")
        .isEqualTo("attempt 3");
    assertThat(left.get().leaseDeadline())
        .as("the taken-back takeover's lease (guarantees.md: ended at the take-back)")
        .isBeforeOrEqualTo(Instant.now());
  }
}
