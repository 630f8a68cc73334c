package dev.idempotency.tck;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRecord;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
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
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * probeO on fixfanout (dea09488), SPEC 1, real time: a batch's key handed out on a loop's thread,
 * not reported, the batch recorded on another thread ({@code record()} leaves it claimed).
 *
 * <ul>
 *   <li>The key is renewed for the renewal limit (1 s) only, so its lease (600 ms) runs out and
 *       another guard takes the key over and sends (the documented second send: the first send
 *       counts as hung). The first send's late report, made while the takeover's send runs, must
 *       leave the takeover alone: a failure report must not release its claim (a third call would
 *       send again), a success report must not overwrite it.
 *   <li>The guard closes past its grace period while the send runs: the key is not released (a
 *       repeat sends nothing), and the late success report writes the outcome a repeat replays.
 * </ul>
 *
 * <p>Extend it with a store: implement {@link #newStore()}, and {@link #closeStore(KeyStore)} if
 * the store holds resources. The store's time is the guards' (the system clock).
 */
public abstract class BatchLateReportAfterRenewalLimitContract {

  /** The idempotency window of the keys. */
  protected static final Duration TTL = Duration.ofHours(1);

  private static final long WAIT_S = 60;

  private final ExecutorService pool = Executors.newFixedThreadPool(3);
  private KeyStore store;
  private IdempotencyGuard guard;
  private IdempotencyGuard other;

  /** A fresh store under test. */
  protected abstract KeyStore newStore();

  /** Releases what {@link #newStore()} opened; nothing by default. */
  protected void closeStore(KeyStore store) {}

  @BeforeEach
  void startGuards() {
    store = newStore();
    guard =
        IdempotencyGuard.builder()
            .store(store)
            .lease(Duration.ofMillis(600))
            .leaseRenewalLimit(Duration.ofSeconds(1))
            .closeGracePeriod(Duration.ofMillis(300))
            .inFlightWait(Duration.ZERO)
            .build();
    other = IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();
  }

  @AfterEach
  void close() {
    pool.shutdownNow();
    guard.close();
    other.close();
    closeStore(store);
  }

  /** The late report is a failure: the takeover stays claimed, a third call sends nothing. */
  @Test
  void aLateFailureReportLeavesTheTakeoverClaimed() throws Exception {
    assertLateReportLeavesTakeoverAlone(false);
  }

  /** The late report is a success: the takeover's outcome is what stays. */
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

    awaitLeaseRunOut(key);

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
        catchThrowable(() -> other.execute(key, TTL, ctx -> "third-" + sends.incrementAndGet()));

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

  /**
   * The guard closed past its grace period with the send running, then the send ends and is
   * reported: the key was not released by the close, and the late report writes its outcome. One
   * send.
   */
  @Test
  void aSendOutlivingRecordAndTheGuardsCloseIsNotSentAgain() throws Exception {
    String key = "probe-o-close-after-record:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item =
        pool.submit(() -> batch.toSend().iterator().next()).get(WAIT_S, TimeUnit.SECONDS);

    assertThat(batch.record().notRecorded()).containsExactly(key);
    guard.close(); // waits its grace period for the key still handed out, then abandons it

    assertThat(other.find(key).map(IdempotencyRecord::state))
        .as("the key after the close, its send still running")
        .contains(RecordState.IN_PROGRESS);
    Throwable repeatDuringSend =
        catchThrowable(() -> other.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet()));
    assertThat(sends).as("sends by a repeat while the first send runs").hasValue(0);

    sends.incrementAndGet(); // the provider accepted the first send
    Throwable lateReport =
        catchThrowable(
            () -> pool.submit(() -> batch.succeeded(item, "sent-1")).get(WAIT_S, TimeUnit.SECONDS));

    String again = other.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet());
    assertThat(sends)
        .as(
            "sends of the key within its window (repeat during send: %s; late report: %s;"
                + " repeat after: %s)",
            repeatDuringSend, lateReport, again)
        .hasValue(1);
    assertThat(again).isEqualTo("sent-1");
  }

  /** Waits, bounded, until the first claim's lease ran out after the renewal limit. */
  private void awaitLeaseRunOut(String key) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (true) {
      Optional<IdempotencyRecord> found = other.find(key);
      if (found.isPresent()
          && found.get().leaseExpiresAt() != null
          && found.get().leaseExpiresAt().isBefore(Instant.now().minusMillis(100))) {
        return;
      }
      if (System.nanoTime() - deadline >= 0) {
        throw new AssertionError("the first claim's lease never ran out: " + found);
      }
      TimeUnit.MILLISECONDS.sleep(20); // a polling pause, bounded above
    }
  }
}
