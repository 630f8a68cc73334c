package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeJ saw it once in three runs of the 16-loop {@code record()} race ({@code
 * BatchRecordRacingLoopsProbeTest}): {@code guard.close()} waited its whole grace period for "1
 * calls still running" although every key had been reported and the batch recorded. The window:
 * {@code hasNext()} of one iteration checks a key (NEW, not handed out), and before it counts the
 * key among the guard's running calls another iteration hands the key out and reports it, and
 * {@code record()} ends the batch; the first iteration then counts the key as running, never hands
 * it out, and nothing ever stops counting it.
 *
 * <p>Made deterministic at that point, without timing: the first iteration's check writes a
 * reported outcome whose lease is short by the guard's clock (moved by hand) before it counts the
 * key, and the store's write, on the test's thread, runs the other iteration's hand-out and report
 * and {@code record()}. In memory, real guard. Before the fix: "[calls the guard counts as running
 * after every key was reported and the batch recorded] expected: 0 but was: 1".
 */
class BatchHandOutStaleCheckCountsRunningTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(4);

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final AtomicReference<Thread> hookThread = new AtomicReference<>();
  final AtomicReference<Runnable> onWrite = new AtomicReference<>();
  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public List<Boolean> completeAll(List<CompleteRequest> requests) {
          if (Thread.currentThread() == hookThread.get()) {
            Runnable hook = onWrite.getAndSet(null);
            if (hook != null) {
              hook.run();
            }
          }
          return delegate.completeAll(requests);
        }
      };
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(clock)
          .lease(LEASE)
          .closeGracePeriod(Duration.ofSeconds(1))
          .inFlightWait(Duration.ZERO)
          .build();

  @AfterEach
  void close() {
    guard.close();
  }

  @Test
  void aKeyCheckedByOneIterationAndSentByAnotherIsNotLeftCountedAsRunning() {
    hookThread.set(Thread.currentThread());
    boolean interleaved = false;
    // the keeper writes a reported outcome after it waited a second (real time): if it wrote the
    // first key's before the second iteration's check did, the point was not reached; again
    for (int attempt = 0; attempt < 5 && !interleaved; attempt++) {
      String written = "stale-check-written:" + UUID.randomUUID();
      String raced = "stale-check-raced:" + UUID.randomUUID();
      Batch<String> batch =
          guard.claimBatch(
              List.of(IdempotencyRequest.of(written, TTL), IdempotencyRequest.of(raced, TTL)),
              ResultCodec.string());
      Iterator<Batch.Item> first = batch.toSend().iterator();
      batch.succeeded(first.next(), "sent-1"); // queued, written within the keeper's period
      assertThat(first.hasNext()).as("the first iteration reserves the second key").isTrue();
      AtomicBoolean ran = new AtomicBoolean();
      onWrite.set(
          () -> {
            // between the second iteration's check of the key and its count as running
            batch.succeeded(first.next(), "sent-2");
            batch.record();
            ran.set(true);
          });
      clock.advance(LEASE.minusMillis(500)); // the queued outcome's lease is short: written now
      Iterator<Batch.Item> second = batch.toSend().iterator();
      if (second.hasNext()) {
        catchThrowable(second::next); // handed out and recorded meanwhile: never handed out here
      }
      onWrite.set(null);
      interleaved = ran.get();
      batch.close();
    }

    assertThat(interleaved).as("the hand-out and record() ran at the point").isTrue();
    assertThat(guard.settings().inFlight.running())
        .as("calls the guard counts as running after every key was reported and the batch recorded")
        .isZero();
  }
}
