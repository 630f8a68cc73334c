package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeJ on fixlease (c49da6b7), SPEC 1: {@link Batch#record()} leaves a key handed out on another
 * thread and not reported claimed, "renewed for the renewal limit from its hand-out". Is it really
 * renewed after {@code record()} (a second guard polling the key through several leases must never
 * get it)? In memory, real clock, real guards. (16 send loops racing {@code record()}: {@code
 * dev.idempotency.tck.BatchRecordRacingLoopsContract}, {@code BatchRecordRacingLoopsProbeTest}.)
 */
class BatchRecordLeftClaimedProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final KeyStore store = InMemoryKeyStore.builder().build();
  final ExecutorService pool = Executors.newFixedThreadPool(17);
  final List<IdempotencyGuard> guards = new ArrayList<>();

  IdempotencyGuard guard(Duration lease) {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).lease(lease).inFlightWait(Duration.ZERO).build();
    guards.add(guard);
    return guard;
  }

  @AfterEach
  void close() {
    pool.shutdownNow();
    guards.forEach(IdempotencyGuard::close);
  }

  /**
   * Lease 2 s; the send runs about 3 leases after record(); a second guard tries the key every 50
   * ms meanwhile. Held: it never gets it, and after the late report it replays the outcome.
   */
  @Test
  void aKeyLeftClaimedByRecordIsRenewedUntilItsLateReport() throws Exception {
    Duration lease = Duration.ofSeconds(2);
    IdempotencyGuard first = guard(lease);
    IdempotencyGuard second = guard(lease);
    String key = "probe-left-claimed:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        first.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = pool.submit(() -> batch.toSend().iterator().next()).get(30, TimeUnit.SECONDS);
    sends.incrementAndGet(); // the provider call has begun, on the loop's thread

    Batch.Recorded recorded = batch.record();
    assertThat(recorded.notRecorded()).containsExactly(key);

    AtomicBoolean reported = new AtomicBoolean();
    AtomicInteger inProgress = new AtomicInteger();
    long until = System.nanoTime() + lease.multipliedBy(3).toNanos();
    while (System.nanoTime() - until < 0) {
      try {
        second.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet());
      } catch (IdempotencyInProgressException held) {
        inProgress.incrementAndGet();
      }
      Thread.sleep(50); // pacing only; the assertion does not depend on it
    }
    pool.submit(
            () -> {
              batch.succeeded(item, "sent-1");
              reported.set(true);
            })
        .get(30, TimeUnit.SECONDS);

    assertThat(reported).isTrue();
    assertThat(second.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet()))
        .isEqualTo("sent-1");
    assertThat(sends)
        .as("sends of the key (repeats refused as in progress: %s)", inProgress)
        .hasValue(1);
    assertThat(inProgress.get()).as("repeats refused as in progress").isPositive();
  }

  /**
   * The key left claimed by record() is reported after its guard closed (grace period 200 ms, so
   * the close stops waiting for it): its outcome must still be written, so that a repeat on another
   * guard, once the first guard's lease would have run out, replays it.
   */
  @Test
  void aLateReportAfterTheGuardClosedIsStillWritten() throws Exception {
    IdempotencyGuard first =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofSeconds(1))
            .closeGracePeriod(Duration.ofMillis(200))
            .inFlightWait(Duration.ZERO)
            .build();
    guards.add(first);
    IdempotencyGuard second = guard(Duration.ofSeconds(1));
    String key = "probe-left-claimed-after-close:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        first.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = pool.submit(() -> batch.toSend().iterator().next()).get(30, TimeUnit.SECONDS);
    sends.incrementAndGet(); // the provider call has begun, on the loop's thread
    batch.record();
    first.close();

    Throwable report =
        pool.submit(
                () -> {
                  try {
                    batch.succeeded(item, "sent-1");
                    return null;
                  } catch (RuntimeException e) {
                    return e;
                  }
                })
            .get(30, TimeUnit.SECONDS);
    Thread.sleep(1500); // past the first guard's lease (1 s): a repeat may take over if unwritten

    String repeat = second.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet());
    assertThat(sends)
        .as("sends of the key (late report threw: %s; repeat returned %s)", report, repeat)
        .hasValue(1);
    assertThat(repeat).isEqualTo("sent-1");
  }
}
