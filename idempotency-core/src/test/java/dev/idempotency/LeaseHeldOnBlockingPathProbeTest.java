package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeF (SPEC 1): {@link SendContext#leaseHeld()}'s Javadoc says it tells whether the guard still
 * holds the send's key, "always {@code true} for a context the guard did not make (tests, adapters)
 * and for a send without a claim", and that a sender which starts its provider call later checks it
 * just before that call. The context of a blocking {@code execute} (and of a batch's item) is made
 * by the guard, under a claim, but is the always-true one ({@code CallSupport.context(int)}): a
 * sender that checks it after its lease lapsed and the key was taken over is told to go on, and
 * sends a second time.
 *
 * <p>In-memory store, lease 4 s without renewal (the lapse then needs no store failure), clock
 * moved by hand. A's sender prepares for 5 s (clock), meanwhile B takes the key over and sends;
 * then A's sender asks {@code leaseHeld()} before its provider call.
 *
 * <p>CONFIRMED on probeF (8a3c40d), both tests: "sends (A got: a-2 (B: b-1)) Expecting
 * AtomicInteger(2) to have value: 1". Severity medium: a second send for a sender that follows the
 * Javadoc on the blocking path or in a batch (the async path checks).
 *
 * <p>FIXED (probeF): {@code execute} and a batch's items give the sender the context that checks
 * the claim ({@code CallSupport.context(Claim)}), as {@code executeAsync} does.
 */
class LeaseHeldOnBlockingPathProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore store = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guardA = guard();
  final IdempotencyGuard guardB = guard();

  IdempotencyGuard guard() {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .leaseRenewal(false)
        .inFlightWait(Duration.ZERO)
        .build();
  }

  @AfterEach
  void close() {
    guardA.close();
    guardB.close();
  }

  @Test
  void leaseHeldOfABlockingExecuteIsFalseOnceTheKeyWasTakenOver() {
    String key = "lease-held-blocking:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    String a;
    try {
      a =
          guardA.execute(
              key,
              TTL,
              ctx -> {
                clock.advance(Duration.ofSeconds(5)); // A's preparation outlives its lease
                String b = guardB.execute(key, TTL, other -> "b-" + sends.incrementAndGet());
                boolean held = ctx.leaseHeld();
                return held ? "a-" + sends.incrementAndGet() + " (B: " + b + ")" : "a-skipped";
              });
    } catch (IdempotencyException e) {
      a = e.toString();
    }
    assertThat(sends).as("sends (A got: %s)", a).hasValue(1);
  }

  @Test
  void leaseHeldOfABatchItemIsFalseOnceTheKeyWasTakenOver() {
    String key = "lease-held-batch:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    String a = "not handed out";
    try (Batch<String> batch =
        guardA.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string())) {
      for (Batch.Item item : batch.toSend()) {
        clock.advance(Duration.ofSeconds(5)); // the item's send queued behind slow work
        String b = guardB.execute(key, TTL, other -> "b-" + sends.incrementAndGet());
        a =
            item.context().leaseHeld()
                ? "a-" + sends.incrementAndGet() + " (B: " + b + ")"
                : "a-skipped";
        batch.succeeded(item, a);
      }
      batch.record();
    }
    assertThat(sends).as("sends (A got: %s)", a).hasValue(1);
  }
}
