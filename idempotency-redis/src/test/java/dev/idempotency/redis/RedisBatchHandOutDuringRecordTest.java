package dev.idempotency.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.Batch;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.ResultCodec;
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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Suspicion 2 (suspects; SPEC 1), on standalone Redis: {@code record()} on one thread while another
 * still iterates {@code toSend()} hands out no key after {@code record()} began, so none is
 * released under its send and sent again by a repeat. As core's {@code
 * BatchHandOutDuringRecordTest} (the in-memory store), with the real Redis store behind the
 * forwarding store that holds the first outcome write until {@code record()} is in its final write.
 */
class RedisBatchHandOutDuringRecordTest {

  static final Duration TTL = Duration.ofHours(1);

  final CountDownLatch writing = new CountDownLatch(1);
  final CountDownLatch letWrite = new CountDownLatch(1);
  final AtomicBoolean holdNextWrite = new AtomicBoolean();

  /** The Redis store, its next outcome write held when the test says so. */
  static StandaloneRedis redis;

  @BeforeAll
  static void startRedis() throws Exception {
    redis = StandaloneRedis.start();
  }

  @AfterAll
  static void stopRedis() throws Exception {
    redis.close();
  }

  final RedisKeyStore redisStore = RedisKeyStore.builder(redis.client()).build();

  final ForwardingKeyStore store =
      new ForwardingKeyStore(redisStore) {
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
    redisStore.close();
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
                    frame.getClassName().equals("dev.idempotency.BatchWriter")
                        && frame.getMethodName().equals("finish"));
  }
}
