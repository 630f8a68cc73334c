package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.UnansweredClaimTakeBackTest.LosingStore;
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
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (SPEC 1, 5, 9; found by probeD): a claim whose answer was lost though the store applied
 * it as a takeover of a lapsed lease (attempt 2) is taken back by the guard. A fenced delete would
 * remove the whole record, and with it the trace of the first owner's attempt 1, whose send may
 * still run: the next caller would claim afresh as attempt 1, no takeover reported, and send while
 * the first owner still sends. The take-back ({@link dev.idempotency.spi.KeyStore#takeBack}) leaves
 * the record as if the lost claim had lapsed: {@code IN_PROGRESS}, attempt 2, its lease passed; the
 * next caller takes over at once as attempt 3, and strict mode answers outcome unknown. In-memory
 * store, answer dropped in front of it.
 */
class TakeBackAfterTakeoverTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final LosingStore store = new LosingStore(memory);
  final CountDownLatch ownerMayFinish = new CountDownLatch(1);
  IdempotencyGuard owner;
  IdempotencyGuard guard;

  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();

  IdempotencyGuard guard(TakeoverPolicy policy) {
    return IdempotencyGuard.builder()
        .listener(events::add)
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .takeoverPolicy(policy)
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
  void aTakeoverTakenBackLeavesTheNextCallerATakeoverNotAFirstAttempt() throws Exception {
    owner = guard(TakeoverPolicy.TAKE_OVER);
    guard = guard(TakeoverPolicy.TAKE_OVER);
    String key = "takeback-takeover:" + UUID.randomUUID();
    String keyId = Digests.keyId(key);
    AtomicInteger sends = new AtomicInteger();
    CompletableFuture<String> first = StalledOwners.sending(owner, key, TTL, sends, ownerMayFinish);
    clock.advance(LEASE.plusSeconds(1)); // the owner stalled past its lease (store's view)

    store.applyAndLoseAnswer.set(1); // a retry takes the key over (attempt 2); its answer is lost
    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "retry-" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class);
    assertThat(sends).as("sends so far: the owner's").hasValue(1);

    // the take-back is fenced by the retry's token, and keeps the record it took over
    await(() -> store.releasesAnswered.get() >= 1, "the take-back's first release");
    Optional<StoredRecord> left = memory.find(keyId, clock.instant());
    try (IdempotencyGuard strict = guard(TakeoverPolicy.REFUSE)) {
      assertThatThrownBy(() -> strict.execute(key, TTL, ctx -> "strict-" + sends.incrementAndGet()))
          .as("strict mode after the take-back of a takeover: the owner's attempt may have sent")
          .isInstanceOf(IdempotencyOutcomeUnknownException.class);
    }
    // the lost answer opened the guard's breaker: its probe, on its own thread, lets a claim try
    await(() -> !guard.settings().outages.knownFailing(), "the guard's breaker to let a claim try");
    AtomicInteger nextAttempt = new AtomicInteger();
    String next =
        guard.execute(
            key,
            TTL,
            ctx -> {
              nextAttempt.set(ctx.attempt());
              return "next-" + sends.incrementAndGet();
            });
    ownerMayFinish.countDown();
    first.get(30, TimeUnit.SECONDS);

    assertThat(nextAttempt)
        .as("attempt() of the next send after a takeover was taken back (SPEC 9: counts takeovers)")
        .hasValue(3);
    assertThat(left)
        .as(
            "the record after the take-back of a takeover whose answer was lost: the owner's"
                + " attempt 1 may have sent")
        .isPresent();
    assertThat(left.get().state()).isEqualTo(RecordState.IN_PROGRESS);
    assertThat(left.get().attempt()).isEqualTo(2);
    assertThat(left.get().leaseDeadline()).isBeforeOrEqualTo(clock.instant());
    assertThat(next).isEqualTo("next-2");
    assertThat(events)
        .as("the next send is reported as a takeover")
        .anyMatch(e -> e.type() == IdempotencyEvent.Type.TAKEOVER && e.attempt() == 3);
    assertThat(sends)
        .as("the owner's send and the takeover's; the strict caller sent none")
        .hasValue(2);
  }
}
