package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
 * probeJ on fixlease (c49da6b7), SPEC 1: {@link Batch#record()} (or {@code close()}) left claimed a
 * key handed out on ANOTHER thread and not reported, but still released one handed out on the
 * recording thread, on the assumption that its send loop ran there and had ended. A common shape
 * breaks that assumption: the loop hands keys out on the caller's thread and fans the provider
 * calls out to an executor; the loop then throws half-way (here: the next submission is refused)
 * inside try-with-resources, so {@code close()} runs on the hand-out thread while the provider
 * calls it already submitted are still running.
 *
 * <p>In memory, real guard; the provider calls wait on a latch so that they are mid-call when the
 * batch closes.
 *
 * <p>Was an open finding (probeJ, on c49da6b7; severity: second send). Before the fix, in memory:
 * close() released the key (handed out on the closing thread), the late {@code succeeded} was
 * refused ("IllegalStateException: record() was already called") and a repeat within the window
 * sent it again: "[sends of probe-batch-fan-out:... within its window (late report refused:
 * [...record() was already called]; repeat returned sent-2)] Expecting AtomicInteger(2) to have
 * value: 1". The hand-out thread is not the sending thread, so no thread rule can tell; now {@code
 * record()} and {@code close()} leave every key handed out and not reported claimed, whatever
 * thread it was handed out on, and its late report writes it: one send.
 */
class BatchFanOutFromRecordingThreadProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(InMemoryKeyStore.builder().build())
          .inFlightWait(Duration.ZERO)
          // the second key, handed out when the loop threw, stays claimed and counted as running:
          // the close would wait for its report for the whole default grace period
          .closeGracePeriod(Duration.ofSeconds(1))
          .build();
  final ExecutorService providerCalls = Executors.newFixedThreadPool(2);

  @AfterEach
  void close() {
    providerCalls.shutdownNow();
    guard.close();
  }

  @Test
  void aProviderCallFannedOutByTheLoopIsNotSentAgainAfterTheLoopThrows() throws Exception {
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      requests.add(IdempotencyRequest.of("probe-batch-fan-out:" + UUID.randomUUID(), TTL));
    }
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch providerAnswers = new CountDownLatch(1);
    List<Future<?>> running = new ArrayList<>();
    List<Throwable> reportsRefused = new ArrayList<>();
    String firstKey = requests.get(0).key();

    Throwable loopFailure =
        catchThrowable(
            () -> {
              try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
                int submitted = 0;
                for (Batch.Item item : batch.toSend()) {
                  if (submitted == 1) {
                    throw new IllegalStateException("the executor refused the second send");
                  }
                  submitted++;
                  running.add(
                      providerCalls.submit(
                          () -> {
                            providerAnswers.await(); // the provider call is under way
                            sends.incrementAndGet(); // the provider accepted the message
                            try {
                              batch.succeeded(item, "sent-1");
                            } catch (IllegalStateException refused) {
                              synchronized (reportsRefused) {
                                reportsRefused.add(refused);
                              }
                            }
                            return null;
                          }));
                }
              }
            });
    providerAnswers.countDown();
    for (Future<?> call : running) {
      call.get(30, TimeUnit.SECONDS);
    }

    String repeat = guard.execute(firstKey, TTL, ctx -> "sent-" + sends.incrementAndGet());

    assertThat(loopFailure).isInstanceOf(IllegalStateException.class);
    assertThat(sends)
        .as(
            "sends of %s within its window (late report refused: %s; repeat returned %s)",
            firstKey, reportsRefused, repeat)
        .hasValue(1);
  }
}
