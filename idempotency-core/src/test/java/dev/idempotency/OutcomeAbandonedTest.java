package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A sender that throws {@link OutcomeAbandonedException} (the starter's JMS delivery whose session
 * was closed under it before its commit): the key is neither recorded nor released, a repeat gets
 * in-progress until the lease runs out, and the send after it is a takeover (attempt 2), SPEC 1's
 * crash case, reported as one. The guard's clock moves time; lease renewal is off, so that the
 * lease runs out by that clock alone.
 */
class OutcomeAbandonedTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(InMemoryKeyStore.builder().build())
          .clock(clock)
          .lease(LEASE)
          .leaseRenewal(false)
          .inFlightWait(Duration.ZERO)
          .listener(events::add)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  @Test
  void anAbandonedSendLeavesItsKeyClaimedUntilTheLeaseRunsOut() {
    String key = "abandon:" + UUID.randomUUID();
    OutcomeAbandonedException abandoned = new OutcomeAbandonedException("test", null);

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> throwing(abandoned)))
        .isSameAs(abandoned);

    assertAbandonedThenTakenOver(key);
  }

  @Test
  void anAbandonedAsyncSendLeavesItsKeyClaimedUntilTheLeaseRunsOut() throws Exception {
    String key = "abandon-async:" + UUID.randomUUID();
    OutcomeAbandonedException abandoned = new OutcomeAbandonedException("test", null);

    CompletableFuture<String> call =
        guard
            .executeAsync(key, TTL, ctx -> CompletableFuture.<String>failedFuture(abandoned))
            .toCompletableFuture();

    assertThatThrownBy(() -> call.get(30, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .cause()
        .isSameAs(abandoned);
    assertAbandonedThenTakenOver(key);
  }

  private void assertAbandonedThenTakenOver(String key) {
    assertThat(types()).contains(IdempotencyEvent.Type.OUTCOME_ABANDONED);
    assertThat(types())
        .doesNotContain(IdempotencyEvent.Type.RELEASED, IdempotencyEvent.Type.COMPLETED);
    assertThat(guard.find(key))
        .as("the key stays claimed")
        .hasValueSatisfying(
            record -> assertThat(record.state()).isEqualTo(RecordState.IN_PROGRESS));

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "again"))
        .as("a repeat within the lease")
        .isInstanceOf(IdempotencyInProgressException.class);

    clock.advance(LEASE.plusSeconds(1));
    int[] attempt = new int[1];
    assertThat(
            guard.execute(
                key,
                TTL,
                ctx -> {
                  attempt[0] = ctx.attempt();
                  return "after the lease";
                }))
        .isEqualTo("after the lease");
    assertThat(attempt[0]).as("the send after the lease is a takeover").isEqualTo(2);
    assertThat(types()).contains(IdempotencyEvent.Type.TAKEOVER);
  }

  private List<IdempotencyEvent.Type> types() {
    return events.stream().map(IdempotencyEvent::type).toList();
  }

  private static String throwing(RuntimeException e) {
    throw e;
  }
}
