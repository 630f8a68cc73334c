package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeO on fixfanout (dea09488), SPEC 1, in memory, real time: a batch's key handed out, not
 * reported, the batch recorded; the key is renewed for the renewal limit (1 s) only, so its lease
 * (600 ms) runs out and another guard takes the key over (a documented second send: the first send
 * counts as hung). The first send's late report, made while the takeover's send runs, must leave
 * the takeover's claim and outcome alone: a failure report must not release the takeover's claim (a
 * third call would send again), a success report must not overwrite it.
 */
class BatchLateReportAfterRenewalLimitProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final long WAIT_S = 60;

  final KeyStore store = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .lease(Duration.ofMillis(600))
          .leaseRenewalLimit(Duration.ofSeconds(1))
          .inFlightWait(Duration.ZERO)
          .build();
  final IdempotencyGuard other =
      IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();
  final ExecutorService pool = Executors.newFixedThreadPool(3);

  @AfterEach
  void close() {
    pool.shutdownNow();
    guard.close();
    other.close();
  }

  @Test
  void aLateFailureReportLeavesTheTakeoverClaimed() throws Exception {
    assertLateReportLeavesTakeoverAlone(false);
  }

  @Test
  void aLateSuccessReportLeavesTheTakeoversOutcome() throws Exception {
    assertLateReportLeavesTakeoverAlone(true);
  }

  private void assertLateReportLeavesTakeoverAlone(boolean lateSuccess) throws Exception {
    String key = "probe-o-late-report-" + lateSuccess + ":" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item =
        pool.submit(() -> batch.toSend().iterator().next()).get(WAIT_S, TimeUnit.SECONDS);
    sends.incrementAndGet(); // the first send: its provider call hangs past the renewal limit
    assertThat(batch.record().notRecorded()).containsExactly(key);

    Poll.within(Duration.ofSeconds(WAIT_S))
        .until(
            "the first claim's lease run out after the renewal limit",
            () -> other.find(key),
            r ->
                r.isPresent()
                    && r.get().leaseExpiresAt() != null
                    && r.get().leaseExpiresAt().isBefore(Instant.now().minusMillis(100)));

    CountDownLatch otherSending = new CountDownLatch(1);
    CountDownLatch otherProviderAnswers = new CountDownLatch(1);
    Future<String> takeover =
        pool.submit(
            () ->
                other.execute(
                    key,
                    TTL,
                    ctx -> {
                      otherSending.countDown();
                      if (!otherProviderAnswers.await(WAIT_S, TimeUnit.SECONDS)) {
                        throw new AssertionError("the provider never answered");
                      }
                      return "takeover-" + sends.incrementAndGet();
                    }));
    assertThat(otherSending.await(WAIT_S, TimeUnit.SECONDS)).as("the takeover sends").isTrue();

    // the first send's report comes now, late, on its thread
    Throwable lateReport =
        catchThrowable(
            () ->
                pool.submit(
                        () -> {
                          if (lateSuccess) {
                            batch.succeeded(item, "first-late");
                          } else {
                            batch.failed(item, new RuntimeException("provider timed out"));
                          }
                        })
                    .get(WAIT_S, TimeUnit.SECONDS));
    Optional<IdempotencyRecord> afterReport = other.find(key);

    // a third call while the takeover's send runs: refused, never sends
    Throwable third =
        catchThrowable(() -> guard.execute(key, TTL, ctx -> "third-" + sends.incrementAndGet()));

    otherProviderAnswers.countDown();
    String takeoverResult = takeover.get(WAIT_S, TimeUnit.SECONDS);
    Throwable repeat =
        catchThrowable(() -> other.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet()));

    assertThat(afterReport.map(IdempotencyRecord::state))
        .as("the record after the late report (late report: %s)", String.valueOf(lateReport))
        .contains(RecordState.IN_PROGRESS);
    assertThat(sends)
        .as(
            "sends: the hung first one and the takeover's, no third (late report: %s; record after"
                + " it: %s; third call: %s; takeover: %s; repeat: %s; record: %s)",
            lateReport, afterReport, third, takeoverResult, repeat, other.find(key))
        .hasValue(2);
    assertThat(other.find(key).map(IdempotencyRecord::state)).contains(RecordState.COMPLETED);
  }
}
