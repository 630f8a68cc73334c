package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (probeG; SPEC 1, 6): a report racing {@code record()}. A worker reports a sent key while
 * another thread calls {@code record()}: the report has passed its check ({@code record()} not yet
 * called) and marked the item reported when {@code record()} starts. Before the fix {@code
 * record()} skipped the reported item and returned; the report then queued its outcome where
 * nothing wrote it, the key stayed in progress, and after the lease a repeat sent again. Now {@code
 * record()} waits for such a report and writes its outcome with the rest: a success is recorded, a
 * failure released, both counted in what {@code record()} returns. A report that outlasts that wait
 * (bounded by the guard's close grace period) writes its outcome itself.
 *
 * <p>In-memory store. The race is ordered through the guard's injected {@link Clock}: its first
 * reading on the worker's thread inside the report (just after the item is marked reported) waits,
 * bounded, until the test lets it go: once {@code record()} on its own thread has returned, or is
 * parked waiting for the report.
 */
class BatchReportRacingRecordTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);

  final MutableClock time = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicReference<Thread> pausedThread = new AtomicReference<>();
  final CountDownLatch paused = new CountDownLatch(1);
  final CountDownLatch resume = new CountDownLatch(1);

  final Clock clock =
      new Clock() {
        @Override
        public Instant instant() {
          if (pausedThread.compareAndSet(Thread.currentThread(), null)) {
            paused.countDown();
            try {
              resume.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          return time.instant();
        }

        @Override
        public ZoneId getZone() {
          return time.getZone();
        }

        @Override
        public Clock withZone(ZoneId zone) {
          throw new UnsupportedOperationException();
        }
      };

  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guard = guard(Duration.ofSeconds(30));
  final ExecutorService worker = Executors.newSingleThreadExecutor();
  final ExecutorService recorder = Executors.newSingleThreadExecutor();
  final AtomicReference<Thread> recordingThread = new AtomicReference<>();

  IdempotencyGuard guard(Duration closeGracePeriod) {
    return IdempotencyGuard.builder()
        .store(memory)
        .clock(clock)
        .lease(LEASE)
        .inFlightWait(Duration.ZERO)
        .closeGracePeriod(closeGracePeriod)
        .build();
  }

  @AfterEach
  void close() {
    resume.countDown();
    worker.shutdownNow();
    recorder.shutdownNow();
    guard.close();
  }

  @Test
  void aSuccessReportedWhileRecordRunsIsWrittenByRecord() throws Exception {
    String key = "batch-report-race:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();
    sends.incrementAndGet(); // the provider accepted the message

    Future<String> report = reportPaused(() -> batch.succeeded(item, "provider-id-1"));
    Batch.Recorded recorded = recordWhileTheReportIsPaused(batch);

    assertThat(report.get(30, TimeUnit.SECONDS)).isEqualTo("accepted");
    assertThat(recorded.completed()).as("record() wrote the report it waited for").isEqualTo(1);
    assertThat(stored(key)).get().extracting(StoredRecord::state).isEqualTo(RecordState.COMPLETED);
    time.advance(LEASE.plusSeconds(1));
    String repeat = guard.execute(key, TTL, ctx -> "provider-id-" + (1 + sends.getAndIncrement()));
    assertThat(repeat).as("a repeat after the lease").isEqualTo("provider-id-1");
    assertThat(sends).hasValue(1);
  }

  @Test
  void aFailureReportedWhileRecordRunsIsReleasedByRecord() throws Exception {
    String key = "batch-report-race-failed:" + UUID.randomUUID();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();

    Future<String> report =
        reportPaused(() -> batch.failed(item, new IOException("provider unavailable")));
    Batch.Recorded recorded = recordWhileTheReportIsPaused(batch);

    assertThat(report.get(30, TimeUnit.SECONDS)).isEqualTo("accepted");
    assertThat(recorded.released()).as("record() released the failure it waited for").isEqualTo(1);
    assertThat(stored(key)).as("released at once, not held for a lease").isEmpty();
    assertThat(guard.execute(key, TTL, ctx -> "retried")).isEqualTo("retried");
  }

  @Test
  void aReportThatOutlastsRecordsWaitWritesItsOwnOutcome() throws Exception {
    IdempotencyGuard shortGrace = guard(Duration.ofMillis(50));
    try {
      String key = "batch-report-race-late:" + UUID.randomUUID();
      Batch<String> batch =
          shortGrace.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
      Batch.Item item = batch.toSend().iterator().next();

      Future<String> report = reportPaused(() -> batch.succeeded(item, "provider-id-1"));
      assertThat(paused.await(30, TimeUnit.SECONDS)).as("the report reached the clock").isTrue();
      Batch.Recorded recorded = batch.record(); // waits 50 ms for the paused report, then stops
      resume.countDown();

      assertThat(report.get(30, TimeUnit.SECONDS)).isEqualTo("accepted");
      assertThat(recorded.completed()).as("not counted: record() stopped waiting").isZero();
      assertThat(stored(key))
          .as("written by the reporting thread before succeeded() returned")
          .get()
          .extracting(StoredRecord::state)
          .isEqualTo(RecordState.COMPLETED);
    } finally {
      shortGrace.close();
    }
  }

  /**
   * A key released by {@code recordReleasingUnreported()} (handed out on its thread, not reported)
   * is refused a report after it. ({@code record()} leaves such a key claimed and accepts its late
   * report: {@code BatchRecordRacingSendsProbeTest}.)
   */
  @Test
  void aReportAfterRecordReleasingUnreportedIsRefused() {
    String key = "batch-report-after-record:" + UUID.randomUUID();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();
    batch.recordReleasingUnreported();
    assertThatThrownBy(() -> batch.succeeded(item, "late"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("record() was already called");
  }

  /** Reports on the worker, whose first reading of the guard's clock waits for {@link #resume}. */
  Future<String> reportPaused(Runnable reporting) {
    return worker.submit(
        () -> {
          pausedThread.set(Thread.currentThread());
          try {
            reporting.run();
            return "accepted";
          } catch (IllegalStateException refused) {
            return "refused: " + refused.getMessage();
          }
        });
  }

  /**
   * Calls {@code record()} on its own thread once the report is paused, and lets the report go on
   * once {@code record()} returned or is parked waiting for it (bounded polling).
   */
  Batch.Recorded recordWhileTheReportIsPaused(Batch<?> batch) throws Exception {
    assertThat(paused.await(30, TimeUnit.SECONDS)).as("the report reached the clock").isTrue();
    Future<Batch.Recorded> recording =
        recorder.submit(
            (Callable<Batch.Recorded>)
                () -> {
                  recordingThread.set(Thread.currentThread());
                  return batch.record();
                });
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(5))
        .until(
            "record() returned, or waits for the report",
            () -> recording.isDone() || waitsForReports(recordingThread.get()));
    resume.countDown();
    return recording.get(30, TimeUnit.SECONDS);
  }

  static boolean waitsForReports(Thread thread) {
    return thread != null
        && Arrays.stream(thread.getStackTrace())
            .anyMatch(frame -> frame.getMethodName().equals("awaitReports"));
  }

  Optional<StoredRecord> stored(String key) {
    return memory.find(Digests.keyId(key), time.instant());
  }
}
