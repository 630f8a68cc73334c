package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Suspicion 2 (suspects; SPEC 1): {@code record()} on one thread while another still iterates
 * {@code toSend()}. {@code record()} closes the batch's reports at once, then writes what is queued
 * and releases every key with no outcome. A key the iterating thread is handed after {@code
 * record()} began can be released under its send, and a repeat then sends it again.
 *
 * <p>In-memory store. The order is fixed by holding the store's first outcome write (a forwarding
 * store whose {@code complete} waits, bounded, for the test): {@code record()} is then parked in
 * its write of the queued outcome, its reports closed, when the other thread asks for the next key.
 *
 * <p>Failed on 18698bb (medium: a second send within the window, SPEC 1): {@code next()} handed the
 * second key out, {@code record()} then released it (it was never reported), and a repeat sent it
 * again (sends 2); {@code Batch.mayHandOut} and {@code next()} never looked at whether {@code
 * record()} began. Now neither hands out a key once it has.
 */
class BatchHandOutDuringRecordTest {

  static final Duration TTL = Duration.ofHours(1);

  final CountDownLatch writing = new CountDownLatch(1);
  final CountDownLatch letWrite = new CountDownLatch(1);
  final AtomicBoolean holdNextWrite = new AtomicBoolean();

  /** The in-memory store, its next outcome write held when the test says so. */
  final ForwardingKeyStore store =
      new ForwardingKeyStore(InMemoryKeyStore.builder().build()) {
        @Override
        public boolean complete(CompleteRequest request) {
          if (holdNextWrite.compareAndSet(true, false)) {
            writing.countDown();
            try {
              letWrite.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          return delegate.complete(request);
        }
      };

  final IdempotencyGuard guard =
      IdempotencyGuard.builder().store(store).inFlightWait(Duration.ZERO).build();
  final ExecutorService recorder = Executors.newSingleThreadExecutor();
  final AtomicReference<Thread> recordingThread = new AtomicReference<>();

  @AfterEach
  void close() {
    letWrite.countDown();
    recorder.shutdownNow();
    guard.close();
  }

  @Test
  void noKeyIsHandedOutOnceRecordBegan() throws Exception {
    String first = "batch-record-handout:" + UUID.randomUUID();
    String second = "batch-record-handout:" + UUID.randomUUID();
    AtomicInteger secondSends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(
            List.of(IdempotencyRequest.of(first, TTL), IdempotencyRequest.of(second, TTL)),
            ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    Batch.Item firstItem = toSend.next();
    holdNextWrite.set(true);
    batch.succeeded(firstItem, "sent-1"); // queued; its write (by record() or the keeper) waits

    Future<Batch.Recorded> recording =
        recorder.submit(
            () -> {
              recordingThread.set(Thread.currentThread());
              return batch.record();
            });
    assertThat(writing.await(30, TimeUnit.SECONDS)).as("an outcome write began").isTrue();
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(5))
        .until("record() is in its final write", () -> inFinish(recordingThread.get()));

    // record() has begun (its reports are closed); the send loop asks for the next key
    Batch.Item handedOut = toSend.hasNext() ? toSend.next() : null;
    if (handedOut != null) {
      secondSends.incrementAndGet(); // the loop sends it, as it was handed out
    }
    letWrite.countDown();
    recording.get(30, TimeUnit.SECONDS);

    guard.execute(second, TTL, ctx -> "repeat-" + secondSends.incrementAndGet());
    assertThat(secondSends).as("sends of the second key").hasValue(1);
    assertThat(handedOut).as("a key handed out after record() began").isNull();
  }

  static boolean inFinish(Thread thread) {
    return thread != null
        && Arrays.stream(thread.getStackTrace())
            .anyMatch(
                frame ->
                    frame.getClassName().equals(BatchWriter.class.getName())
                        && frame.getMethodName().equals("finish"));
  }
}
