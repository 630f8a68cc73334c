package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.tck.ObservedKeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The guard's background write of an outcome its call could not record (issue 39/37, SPEC 1 and 6),
 * on the in-memory store with injected write failures and the guard's clock: what a listener sees,
 * the cap on pending writes, and the give-up by the guard's clock. The same on real Redis and
 * PostgreSQL: {@code RedisOutcomeWriteRetryTest}, {@code PostgresOutcomeWriteRetryTest}.
 */
class BackgroundOutcomeWriteTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  IdempotencyGuard guard;

  IdempotencyGuard guard(int maxPendingOutcomes) {
    return guard(maxPendingOutcomes, LEASE);
  }

  IdempotencyGuard guard(int maxPendingOutcomes, Duration lease) {
    guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .lease(lease)
            .maxPendingOutcomes(maxPendingOutcomes)
            .closeGracePeriod(Duration.ofSeconds(5))
            .listener(events::add)
            .build();
    return guard;
  }

  @AfterEach
  void close() {
    store.failCompletes.set(0);
    guard.close();
  }

  @Test
  void aWriteTheStoreTakesLaterIsReportedAndReplayed() throws Exception {
    guard(IdempotencyGuard.DEFAULT_MAX_PENDING_OUTCOMES);
    String key = "late:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    store.failCompletes.set(IdempotencyGuard.DEFAULT_COMPLETION_ATTEMPTS + 2);

    Outcome<String> first =
        guard.executeForOutcome(
            IdempotencyRequest.of(key, TTL),
            ResultCodec.string(),
            ctx -> "n_" + sends.incrementAndGet());
    await(() -> types().contains(Type.OUTCOME_RECORDED_LATE), "the write in the background");

    assertThat(first.value()).isEqualTo("n_1");
    assertThat(first.recorded()).as("not recorded when the call returned").isFalse();
    assertThat(types()).containsSubsequence(Type.OUTCOME_NOT_RECORDED, Type.OUTCOME_RECORDED_LATE);
    assertThat(guard.find(key).orElseThrow().state()).isEqualTo(RecordState.COMPLETED);
    assertThat(guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet())).isEqualTo("n_1");
    assertThat(sends).hasValue(1);
  }

  @Test
  void pastTheCapAnOutcomeIsNotWrittenLaterAndThePendingOneEndsWithItsLease() throws Exception {
    guard(1);
    store.failCompletes.set(1_000_000);
    String pending = "pending:" + UUID.randomUUID();
    String overCap = "over-cap:" + UUID.randomUUID();

    guard.execute(pending, TTL, ctx -> "sent");
    guard.execute(overCap, TTL, ctx -> "sent");
    int completesAfterCalls = store.completes.get();
    await(() -> store.completes.get() > completesAfterCalls, "the pending write to be tried again");
    clock.advance(LEASE.plusSeconds(1));
    await(() -> types().contains(Type.OUTCOME_ABANDONED), "the pending write to give up");
    long start = System.nanoTime();
    guard.close();

    assertThat(types().stream().filter(type -> type == Type.OUTCOME_NOT_RECORDED)).hasSize(2);
    assertThat(types().stream().filter(type -> type == Type.OUTCOME_ABANDONED)).hasSize(1);
    assertThat(types()).doesNotContain(Type.OUTCOME_RECORDED_LATE);
    assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start))
        .as("close() with nothing pending")
        .isLessThan(1_000);
  }

  /**
   * The keeper goes on renewing a claim whose outcome waits to be written (its store answers
   * renewals, not writes), and each renewal gives the write longer: past the lease it was claimed
   * with, by the guard's clock, the write is still pending and is recorded once the store takes it.
   */
  @Test
  void aRenewalTheStoreTakesGivesThePendingWriteLonger() throws Exception {
    Duration lease = Duration.ofMillis(400);
    guard(IdempotencyGuard.DEFAULT_MAX_PENDING_OUTCOMES, lease);
    store.failCompletes.set(1_000_000);
    String key = "renewed:" + UUID.randomUUID();

    guard.execute(key, TTL, ctx -> "sent");
    clock.advance(Duration.ofMillis(300));
    int renewalsBefore = store.extensions.get();
    // two renewals: the second surely started after the clock moved (a claim renews one at a time)
    await(() -> store.extensions.get() >= renewalsBefore + 2, "two renewals of the pending claim");
    clock.advance(Duration.ofMillis(300)); // 600 ms after the claim: past its first lease
    int completesNow = store.completes.get();
    await(() -> store.completes.get() > completesNow, "a write tried past the first lease");
    store.failCompletes.set(0);
    await(() -> types().contains(Type.OUTCOME_RECORDED_LATE), "the write in the background");

    assertThat(types()).doesNotContain(Type.OUTCOME_ABANDONED);
    assertThat(guard.find(key).orElseThrow().state()).isEqualTo(RecordState.COMPLETED);
  }

  @Test
  void closeGivesAPendingWriteItsGracePeriod() throws Exception {
    guard(IdempotencyGuard.DEFAULT_MAX_PENDING_OUTCOMES);
    store.failCompletes.set(IdempotencyGuard.DEFAULT_COMPLETION_ATTEMPTS + 2);
    String key = "at-close:" + UUID.randomUUID();

    guard.execute(key, TTL, ctx -> "sent");
    guard.close();

    assertThat(types()).contains(Type.OUTCOME_RECORDED_LATE).doesNotContain(Type.OUTCOME_ABANDONED);
    try (IdempotencyGuard reader = IdempotencyGuard.builder().store(store).clock(clock).build()) {
      assertThat(reader.find(key).orElseThrow().state()).isEqualTo(RecordState.COMPLETED);
    }
  }

  private List<Type> types() {
    return events.stream().map(IdempotencyEvent::type).toList();
  }
}
