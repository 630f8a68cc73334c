package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO on fixfanout (dea09488), SPEC 1, in memory: a batch's key handed out and not reported, the
 * batch recorded, then the guard closed. The key must neither be sent twice (released while its
 * send still runs, or its late report dropped) nor lost (left claimed with no send). A second guard
 * on the same store stands for the repeat (a redelivery, another instance).
 */
class BatchHandedOutKeyAcrossGuardCloseProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final KeyStore store = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .inFlightWait(Duration.ZERO)
          .closeGracePeriod(Duration.ofMillis(300))
          .build();
  final IdempotencyGuard other =
      IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();
  final ExecutorService pool = Executors.newFixedThreadPool(2);

  @AfterEach
  void close() {
    pool.shutdownNow();
    guard.close();
    other.close();
  }

  /**
   * Same, the send ending within the close's grace period: the close waits for it and its outcome
   * is written; a repeat replays it.
   */
  @Test
  void aSendEndingWithinTheClosesGracePeriodIsRecorded() throws Exception {
    String key = "probe-o-close-within-grace:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    IdempotencyGuard patient =
        IdempotencyGuard.builder()
            .store(store)
            .inFlightWait(Duration.ZERO)
            .closeGracePeriod(Duration.ofSeconds(30))
            .build();
    try {
      Batch<String> batch =
          patient.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
      Batch.Item item =
          pool.submit(() -> batch.toSend().iterator().next()).get(30, TimeUnit.SECONDS);
      batch.record();
      var closing = pool.submit(patient::close);
      // the close waits for the key handed out: the send ends, and is reported, meanwhile
      sends.incrementAndGet();
      batch.succeeded(item, "sent-1");
      closing.get(60, TimeUnit.SECONDS);
    } finally {
      patient.close();
    }
    String again = other.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet());
    assertThat(again).isEqualTo("sent-1");
    assertThat(sends).as("sends of the key within its window").hasValue(1);
  }

  /**
   * hasNext() answered true, the guard closed, then next(): no key is handed out under a closed
   * guard, and the key is not lost: record() releases it and the other guard sends it once.
   */
  @Test
  void hasNextThenGuardCloseThenNextHandsNothingOutAndLosesNothing() {
    String key = "probe-o-hasnext-close-next:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    assertThat(toSend.hasNext()).isTrue();

    guard.close();
    Throwable next = catchThrowable(toSend::next);
    Batch.Recorded recorded = batch.record();

    assertThat(next).as("next() after the guard closed").isNotNull();
    assertThat(recorded.notRecorded()).as("recorded: %s", recorded).isEmpty();
    assertThat(other.find(key)).as("the key after record(), never handed out").isEmpty();
    assertThat(other.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet()))
        .isEqualTo("sent-1");
    assertThat(sends).hasValue(1);
  }
}
