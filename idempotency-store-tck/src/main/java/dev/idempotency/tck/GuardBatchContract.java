package dev.idempotency.tck;

import static java.time.Duration.ZERO;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.CompleteRequest;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The guard's promises on a store when a batch's {@code record()} and its send loop overlap: no key
 * is handed out once {@code record()} began, so none is released under its send and sent again by a
 * repeat (SPEC 1). Part of {@link GuardOnStoreContract}; extend that one.
 */
public abstract class GuardBatchContract extends GuardLeaseContract {

  /**
   * {@code record()} on one thread while another still iterates {@code toSend()}: {@code record()}
   * closes the batch's reports at once, then writes what is queued and releases every key with no
   * outcome, so a key handed out after it began would be released under its send, and a repeat
   * would send it again.
   *
   * <p>The order is fixed by holding the store's first outcome write (a forwarding store whose
   * {@code complete} waits, bounded, for the test): {@code record()} is then parked in its write of
   * the queued outcome, its reports closed, when the other thread asks for the next key.
   */
  @Test
  public void noBatchKeyIsHandedOutOnceRecordBegan() throws Exception {
    CountDownLatch writing = new CountDownLatch(1);
    CountDownLatch letWrite = new CountDownLatch(1);
    AtomicBoolean holdNextWrite = new AtomicBoolean();
    ForwardingKeyStore held =
        new ForwardingKeyStore(store()) {
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
    IdempotencyGuard guard = IdempotencyGuard.builder().store(held).inFlightWait(ZERO).build();
    ExecutorService recorder = Executors.newSingleThreadExecutor();
    AtomicReference<Thread> recordingThread = new AtomicReference<>();
    try {
      String run = newKeyId();
      String first = "batch-record-handout:" + run + ":1";
      String second = "batch-record-handout:" + run + ":2";
      AtomicInteger secondSends = new AtomicInteger();
      Batch<String> batch =
          guard.claimBatch(
              List.of(
                  IdempotencyRequest.of(first, LONG_RETENTION),
                  IdempotencyRequest.of(second, LONG_RETENTION)),
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
      awaitFinalWrite(recordingThread);

      // record() has begun (its reports are closed); the send loop asks for the next key
      Batch.Item handedOut = toSend.hasNext() ? toSend.next() : null;
      if (handedOut != null) {
        secondSends.incrementAndGet(); // the loop sends it, as it was handed out
      }
      letWrite.countDown();
      recording.get(30, TimeUnit.SECONDS);

      guard.execute(second, LONG_RETENTION, ctx -> "repeat-" + secondSends.incrementAndGet());
      assertThat(secondSends).as("sends of the second key").hasValue(1);
      assertThat(handedOut).as("a key handed out after record() began").isNull();
    } finally {
      letWrite.countDown();
      recorder.shutdownNow();
      guard.close();
    }
  }

  /**
   * Waits, bounded, until the recording thread is in the batch's final write ({@code
   * BatchWriter.finish}, core's writer of this version): the keeper may have begun the held write
   * before {@code record()} was called, so the held write alone does not show that it began.
   */
  private static void awaitFinalWrite(AtomicReference<Thread> recordingThread) {
    long deadline = System.nanoTime() + POLL_LIMIT.toNanos();
    while (!inFinalWrite(recordingThread.get())) {
      assertThat(System.nanoTime() - deadline < 0)
          .as("record() is in its final write within " + POLL_LIMIT)
          .isTrue();
      pause(5);
    }
  }

  private static boolean inFinalWrite(Thread thread) {
    return thread != null
        && Arrays.stream(thread.getStackTrace())
            .anyMatch(
                frame ->
                    frame.getClassName().equals("dev.idempotency.BatchWriter")
                        && frame.getMethodName().equals("finish"));
  }
}
