package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.testservers.Poll;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeW, SPEC 1 and 14) of probeT's close fix (38ad881) from the other side: a key handed
 * out before {@code close()}, whose send ends within the grace period, must have its outcome
 * recorded ("calls already running when close() starts finish as they would have: ... their
 * outcomes recorded"). A batch's report ({@code Batch.queue}) stopped counting the item among the
 * guard's running calls ({@code stopRunning}) before it queued the outcome ({@code
 * writer.enqueue}); the close, no longer waiting for it, wrote what was queued ({@code
 * LeaseKeeper.close}, the batch's {@code closing()}) and stopped the keeper. A reporting thread
 * paused between the two (preempted on a busy machine) queued its outcome after the close wrote the
 * queue and stopped the keeper: nothing wrote it for a batch that is not recorded (the Javadoc of
 * {@link Batch} allows one to be abandoned); the key stayed IN_PROGRESS, and a repeat one lease
 * later took it over and sent again.
 *
 * <p>Fixed by fixbatch: a report counts as running until its outcome is queued and its batch
 * watched by the keeper, so a close that waits for it writes it; the keeper orders a watch against
 * its close, and a report whose batch it no longer watches (the close gave up on it after its grace
 * period, or the report began after the close) writes its outcome itself, on its own thread.
 *
 * <p>The pause is made deterministic: the guard's clock, read by {@code BatchReports.queue} before
 * the outcome is queued (the send's length), waits there until the test opens its gate (at most 10
 * s). In-memory store (the guard's clock); lease 4 s.
 */
class BatchReportRacingCloseProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  /** The guard's clock: moved by hand; read in {@code BatchReports.queue}, waits for the gate. */
  static final class GatedClock extends Clock {
    private volatile Instant now = Instant.parse("2030-01-01T00:00:00Z");
    final AtomicBoolean armed = new AtomicBoolean();
    final CountDownLatch paused = new CountDownLatch(1);
    final CountDownLatch gate = new CountDownLatch(1);

    void advance(Duration duration) {
      now = now.plus(duration);
    }

    @Override
    public Instant instant() {
      if (armed.get() && inQueue() && armed.compareAndSet(true, false)) {
        paused.countDown();
        try {
          gate.await(10, TimeUnit.SECONDS); // bounded: the probe goes on either way
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return now;
    }

    private static boolean inQueue() {
      return StackWalker.getInstance()
          .walk(
              frames ->
                  frames.anyMatch(
                      frame ->
                          frame.getClassName().equals("dev.idempotency.BatchReports")
                              && frame.getMethodName().equals("queue")));
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }
  }

  final GatedClock clock = new GatedClock();
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final IdempotencyGuard guardA =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .closeGracePeriod(Duration.ofSeconds(5))
          .build();
  final IdempotencyGuard guardB =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guardA.close();
    guardB.close();
  }

  /*
   * Was an open finding (probeW, on 164f714; low to medium: a second send, needing an abandoned
   * batch and a reporting thread paused in a window of a few instructions while the guard closes),
   * fixed by fixbatch. Failed: "[a's outcome, reported within the grace period, recorded by the
   * close] expected: COMPLETED but was: IN_PROGRESS" and "[a sent once (B got: b-2)] expected: 1
   * but was: 2". Here the report stays paused past the close's grace period (5 s): the close gives
   * up on it, and the report, let go after the close returned, writes its outcome itself.
   */
  @Test
  void anOutcomeReportedWhileTheGuardClosesIsRecorded() throws Exception {
    String a = "batch-report-racing-close:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guardA.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    Batch.Item item = toSend.next();
    sends.incrementAndGet(); // the send, short

    clock.armed.set(true);
    Thread reporter = new Thread(() -> batch.succeeded(item, "a-1"), "probeW-reporter");
    reporter.start();
    assertThat(clock.paused.await(10, TimeUnit.SECONDS))
        .as("the report paused before its outcome was queued")
        .isTrue();
    Thread closer = new Thread(guardA::close, "probeW-closer");
    closer.start();
    closer.join(30_000);
    boolean closed = !closer.isAlive();
    clock.gate.countDown();
    reporter.join(30_000);

    SoftAssertions softly = new SoftAssertions();
    softly.assertThat(closed).as("close returned within its grace period").isTrue();
    softly
        .assertThat(guardB.find(a).map(IdempotencyRecord::state).orElse(null))
        .as("a's outcome, reported after the close gave up on it, recorded by the report")
        .isEqualTo(RecordState.COMPLETED);
    clock.advance(LEASE.plusSeconds(1)); // the batch is never recorded (abandoned)
    String b;
    try {
      b = guardB.execute(a, TTL, ctx -> "b-" + sends.incrementAndGet());
    } catch (IdempotencyInProgressException expected) {
      b = "in progress";
    }
    softly.assertThat(sends.get()).as("a sent once (B got: %s)", b).isEqualTo(1);
    softly.assertAll();
  }

  /** The control: the same pause, the batch recorded after the close; its outcome is written. */
  @Test
  void anOutcomeReportedWhileTheGuardClosesIsRecordedByRecord() throws Exception {
    String a = "batch-report-racing-close-recorded:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guardA.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();
    sends.incrementAndGet();
    clock.armed.set(true);
    Thread reporter = new Thread(() -> batch.succeeded(item, "a-1"), "probeW-reporter");
    reporter.start();
    assertThat(clock.paused.await(10, TimeUnit.SECONDS)).isTrue();
    Thread closer = new Thread(guardA::close, "probeW-closer");
    closer.start();
    closer.join(30_000);
    clock.gate.countDown();
    reporter.join(30_000);
    Batch.Recorded recorded = batch.record();
    clock.advance(LEASE.plusSeconds(1));
    String b = guardB.execute(a, TTL, ctx -> "b-" + sends.incrementAndGet());
    assertThat(sends.get()).as("a sent once (B got: %s; %s)", b, recorded).isEqualTo(1);
    assertThat(b).isEqualTo("a-1");
  }

  /**
   * The close waits for a report that has begun (within its grace period, 60 s here) and writes its
   * outcome: the report, paused before its outcome is queued, goes on once the close is waiting;
   * the close then returns long before its grace period ends, with the outcome written.
   */
  @Test
  void anOutcomeBeingQueuedWhenTheGuardClosesIsWaitedForAndWrittenByTheClose() throws Exception {
    String a = "batch-report-waited-by-close:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    IdempotencyGuard guardC =
        IdempotencyGuard.builder()
            .store(memory)
            .clock(clock)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .closeGracePeriod(Duration.ofSeconds(60))
            .build();
    try {
      Batch<String> batch =
          guardC.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string());
      Batch.Item item = batch.toSend().iterator().next();
      sends.incrementAndGet();
      clock.armed.set(true);
      Thread reporter = new Thread(() -> batch.succeeded(item, "a-1"), "fixbatch-reporter");
      reporter.start();
      assertThat(clock.paused.await(10, TimeUnit.SECONDS))
          .as("the report paused before its outcome was queued")
          .isTrue();
      Thread closer = new Thread(guardC::close, "fixbatch-closer");
      closer.start();
      Poll.within(Duration.ofSeconds(30))
          .until("the close to begin", () -> guardC.settings().closed());
      clock.gate.countDown();
      closer.join(30_000);
      assertThat(closer.isAlive())
          .as("close returned once the report was queued, not at the end of its grace period")
          .isFalse();
      assertThat(guardB.find(a).map(IdempotencyRecord::state).orElse(null))
          .as("a's outcome, reported while the close waited, written when close returned")
          .isEqualTo(RecordState.COMPLETED);
      reporter.join(30_000);
      clock.advance(LEASE.plusSeconds(1)); // the batch is never recorded (abandoned)
      String b = guardB.execute(a, TTL, ctx -> "b-" + sends.incrementAndGet());
      assertThat(sends.get()).as("a sent once (B got: %s)", b).isEqualTo(1);
      assertThat(b).isEqualTo("a-1");
    } finally {
      clock.gate.countDown();
      guardC.close();
    }
  }

  /**
   * A report that begins after the close (which gave up on its key at once: grace 0) is not lost:
   * it writes its outcome itself, and a repeat replays it.
   */
  @Test
  void anOutcomeReportedAfterTheGuardClosedIsWrittenByTheReport() {
    String a = "batch-report-after-close:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    IdempotencyGuard guardC =
        IdempotencyGuard.builder()
            .store(memory)
            .clock(clock)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .closeGracePeriod(Duration.ZERO)
            .build();
    try {
      Batch<String> batch =
          guardC.claimBatch(List.of(IdempotencyRequest.of(a, TTL)), ResultCodec.string());
      Batch.Item item = batch.toSend().iterator().next();
      sends.incrementAndGet();
      guardC.close();
      batch.succeeded(item, "a-1");
      assertThat(guardB.find(a).map(IdempotencyRecord::state).orElse(null))
          .as("a's outcome, reported after the close, written by the report")
          .isEqualTo(RecordState.COMPLETED);
      clock.advance(LEASE.plusSeconds(1)); // the batch is never recorded (abandoned)
      String b = guardB.execute(a, TTL, ctx -> "b-" + sends.incrementAndGet());
      assertThat(sends.get()).as("a sent once (B got: %s)", b).isEqualTo(1);
      assertThat(b).isEqualTo("a-1");
    } finally {
      guardC.close();
    }
  }
}
