package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Probe (probeG, issue 37, batches: a key handed out and reported, racing {@code record()}; SPEC 1:
 * an outcome lost, then a duplicate without a crash). A worker reports a sent key with {@code
 * succeeded} while another thread calls {@code record()}. The report passes its check ({@code
 * record()} not yet called) and marks the item reported; {@code record()} then finds it reported
 * (so neither releases nor writes it: the queue was empty when it wrote) and returns; the report
 * then queues the outcome, and re-watches the batch only while {@code record()} has not returned.
 * So the outcome is queued where nothing writes it, and the worker was not told ({@code
 * IllegalStateException} is the documented answer to a report after {@code record()}): the key
 * stays in progress, and once its lease ends the next caller takes it over and sends again.
 *
 * <p>In-memory store. The only device is the guard's clock (an injected {@link Clock}): its first
 * reading on the worker's thread inside {@code succeeded} (just after the item is marked reported)
 * waits, bounded, until {@code record()} has returned on the test thread.
 */
@Tag("open-finding")
class BatchReportRacingRecordProbeTest {

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
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(memory)
          .clock(clock)
          .lease(LEASE)
          .inFlightWait(Duration.ZERO)
          .build();
  final ExecutorService worker = Executors.newSingleThreadExecutor();

  @AfterEach
  void close() {
    resume.countDown();
    worker.shutdownNow();
    guard.close();
  }

  @Test
  void aSentKeyReportedWhileRecordRunsIsRecordedOrTheReportRefused() throws Exception {
    String key = "batch-report-race:" + UUID.randomUUID();
    String keyId = Digests.keyId(key);
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();
    sends.incrementAndGet(); // the provider accepted the message

    Future<String> report =
        worker.submit(
            () -> {
              pausedThread.set(Thread.currentThread());
              try {
                batch.succeeded(item, "provider-id-1");
                return "accepted";
              } catch (IllegalStateException refused) {
                return "refused: " + refused.getMessage();
              }
            });
    assertThat(paused.await(30, TimeUnit.SECONDS)).as("the report reached the clock").isTrue();
    Batch.Recorded recorded = batch.record();
    resume.countDown();
    String reported = report.get(30, TimeUnit.SECONDS);

    if (!reported.equals("accepted")) {
      return; // the worker was told its report came after record(): the documented answer
    }
    // accepted: the keeper writes queued outcomes within its period (a second here); allow ten
    boolean written;
    try {
      Poll.within(Duration.ofSeconds(10))
          .every(Duration.ofMillis(100))
          .until(
              "the reported outcome recorded",
              () -> memory.find(keyId, time.instant()),
              r -> r.isPresent() && r.get().state() == RecordState.COMPLETED);
      written = true;
    } catch (AssertionError notWritten) {
      written = false;
    }
    Optional<StoredRecord> left = memory.find(keyId, time.instant());
    time.advance(LEASE.plusSeconds(1));
    String repeat = guard.execute(key, TTL, ctx -> "provider-id-" + (1 + sends.getAndIncrement()));

    assertThat(written)
        .as(
            "an accepted report is written (record() returned %s; the record 10 s later: %s; a"
                + " repeat after the lease got %s, sends %s)",
            recorded, left, repeat, sends.get())
        .isTrue();
    assertThat(repeat).as("a repeat after the lease").isEqualTo("provider-id-1");
    assertThat(sends).hasValue(1);
  }
}
