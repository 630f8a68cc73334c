package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * probeF (SPEC 1, after 688f7f8): a batch item failed with {@link OutcomeAbandonedException} stays
 * claimed until its lease runs out, whatever ends the batch next: {@link Batch#close()} (which
 * releases the keys that got no report), or the guard's close with the batch never recorded (the
 * keeper's {@code closing()} and the guard's background releases). A second guard on the same store
 * then finds the key in progress, sends nothing, and takes it over only after the lease.
 */
class BatchAbandonedThenClosedProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore store = InMemoryKeyStore.builder().build();

  IdempotencyGuard guard() {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .closeGracePeriod(Duration.ofMillis(200))
        .build();
  }

  @Test
  void batchCloseLeavesTheAbandonedKeyClaimed() {
    try (IdempotencyGuard a = guard();
        IdempotencyGuard b = guard()) {
      String abandoned = "abandon-close:" + UUID.randomUUID();
      String unsent = "abandon-close-unsent:" + UUID.randomUUID();
      AtomicInteger sends = new AtomicInteger();
      Batch<String> batch =
          a.claimBatch(
              List.of(IdempotencyRequest.of(abandoned, TTL), IdempotencyRequest.of(unsent, TTL)),
              ResultCodec.string());
      var items = batch.toSend().iterator();
      Batch.Item first = items.next();
      sends.incrementAndGet();
      batch.failed(first, new OutcomeAbandonedException("cannot commit", null));
      batch.close(); // the second key, never handed out, is released

      assertThat(b.find(abandoned).map(IdempotencyRecord::state)).contains(RecordState.IN_PROGRESS);
      assertThat(repeat(b, abandoned, sends)).isEqualTo("in progress");
      assertThat(repeat(b, unsent, sends)).isEqualTo("again-1");
      clock.advance(LEASE.plusSeconds(1));
      assertThat(repeat(b, abandoned, sends)).isEqualTo("again-2");
    }
  }

  @Test
  void guardCloseWithTheBatchNeverRecordedLeavesTheAbandonedKeyClaimed() {
    String abandoned = "abandon-guard-close:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    IdempotencyGuard a = guard();
    Batch<String> batch =
        a.claimBatch(List.of(IdempotencyRequest.of(abandoned, TTL)), ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      sends.incrementAndGet();
      batch.failed(item, new OutcomeAbandonedException("cannot commit", null));
    }
    a.close(); // the batch is never recorded
    try (IdempotencyGuard b = guard()) {
      assertThat(repeat(b, abandoned, sends)).isEqualTo("in progress");
      clock.advance(LEASE.plusSeconds(1));
      assertThat(repeat(b, abandoned, sends)).isEqualTo("again-2");
    }
  }

  private static String repeat(IdempotencyGuard guard, String key, AtomicInteger sends) {
    try {
      return guard.execute(
          key,
          TTL,
          ctx -> {
            sends.incrementAndGet();
            return "again-" + ctx.attempt();
          });
    } catch (IdempotencyInProgressException inProgress) {
      return "in progress";
    }
  }
}
