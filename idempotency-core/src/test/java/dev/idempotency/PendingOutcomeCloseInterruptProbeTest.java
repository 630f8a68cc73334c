package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Probe (issue 37, probeF): {@code PendingOutcomes.close()} stops its writer with {@code
 * shutdownNow()}, which interrupts a background write still in progress once the close grace has
 * passed. A store client that honours interrupts (the write applied by the server, the wait for its
 * answer interrupted) then fails a write that was in fact recorded. Checked: the key is sent once
 * and its outcome stays recorded (a repeat replays, through a new guard); and what the closed guard
 * reports for it: a recorded outcome must not be reported {@code OUTCOME_ABANDONED} ("a repeat may
 * send again"), nor reported twice.
 */
@Tag("open-finding")
class PendingOutcomeCloseInterruptProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final InMemoryKeyStore memory = InMemoryKeyStore.builder().build();
  final AtomicBoolean failCallerWrites = new AtomicBoolean(true);
  final CountDownLatch backgroundWriteApplied = new CountDownLatch(1);
  final CountDownLatch answerMayCome = new CountDownLatch(1);
  final AtomicInteger interruptedWrites = new AtomicInteger();

  /**
   * The call's own write fails (the store down); the background write is applied and its answer
   * waits, interruptibly, as a driver that honours interrupts waits for the server's reply.
   */
  final ForwardingKeyStore store =
      new ForwardingKeyStore(memory) {
        @Override
        public boolean complete(CompleteRequest request) {
          if (failCallerWrites.get()) {
            throw new KeyStoreException("the store is down", null);
          }
          boolean written = delegate.complete(request);
          backgroundWriteApplied.countDown();
          try {
            if (!answerMayCome.await(30, TimeUnit.SECONDS)) {
              throw new IllegalStateException("the test never let the answer come");
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            interruptedWrites.incrementAndGet();
            throw new KeyStoreException("interrupted while waiting for the write's answer", e);
          }
          return written;
        }
      };

  @Test
  void aBackgroundWriteInterruptedByCloseAfterItWasApplied() throws Exception {
    List<IdempotencyEvent.Type> events = new CopyOnWriteArrayList<>();
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .completionAttempts(1)
            .closeGracePeriod(Duration.ofMillis(200))
            .listener(event -> events.add(event.type()))
            .build();
    String key = "close-interrupt:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    String result;
    try {
      result =
          guard.execute(
              key,
              TTL,
              ctx -> {
                String r = "s" + sends.incrementAndGet();
                return r;
              });
      failCallerWrites.set(false); // the store is back: the background round writes it
      assertThat(backgroundWriteApplied.await(30, TimeUnit.SECONDS))
          .as("the background write reached the store")
          .isTrue();
    } finally {
      guard.close(); // the grace passes with the write's answer still awaited
    }
    answerMayCome.countDown();
    assertThat(result).isEqualTo("s1");
    Optional<StoredRecord> stored = memory.find(Digests.keyId(key), clock.instant());
    assertThat(stored.map(StoredRecord::state)).hasValue(RecordState.COMPLETED);
    try (IdempotencyGuard next = IdempotencyGuard.builder().store(memory).clock(clock).build()) {
      assertThat(next.execute(key, TTL, ctx -> "s" + sends.incrementAndGet())).isEqualTo("s1");
    }
    assertThat(sends).hasValue(1);
    // what the closed guard said of that outcome (bounded: the interrupted round ends at once)
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!events.contains(IdempotencyEvent.Type.OUTCOME_ABANDONED)
        && !events.contains(IdempotencyEvent.Type.OUTCOME_RECORDED_LATE)
        && System.nanoTime() - until < 0) {
      TimeUnit.MILLISECONDS.sleep(20);
    }
    assertThat(events)
        .as(
            "events of a send whose outcome was recorded (background write interrupted %d times)",
            interruptedWrites.get())
        .doesNotContain(IdempotencyEvent.Type.OUTCOME_ABANDONED)
        .containsOnlyOnce(IdempotencyEvent.Type.OUTCOME_RECORDED_LATE);
  }
}
