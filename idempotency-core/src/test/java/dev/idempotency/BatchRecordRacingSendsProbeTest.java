package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import java.time.Duration;
import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * probeR: {@link Batch#record()} racing send loops on other threads (af14534: no key handed out
 * once record() began). In-memory store, real guard.
 */
class BatchRecordRacingSendsProbeTest {

  static final Duration TTL = Duration.ofHours(1);

  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(InMemoryKeyStore.builder().build())
          .inFlightWait(Duration.ZERO)
          .build();
  final ExecutorService pool = Executors.newFixedThreadPool(5);

  @AfterEach
  void close() {
    pool.shutdownNow();
    guard.close();
  }

  /**
   * A key handed out before record() began, whose send is still running on the loop's thread when
   * another thread calls record(): record() released it (fenced delete, as "never reported"), the
   * loop's report was refused, and a repeat within the window sent it again (SPEC 1, a second
   * send). Before the fix: "[sends of the key within its window] Expecting AtomicInteger(2) to have
   * value: 1". Now record() leaves a key handed out on another thread and not reported claimed
   * (listed in notRecorded()), and that key's report, made after record(), writes its outcome: the
   * repeat replays it.
   */
  @Test
  void aSendRunningWhenRecordIsCalledIsNotSentAgainByARepeat() throws Exception {
    String key = "probe-batch-inflight:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item =
        pool.submit(() -> batch.toSend().iterator().next()) // the loop's thread is handed the key
            .get(30, TimeUnit.SECONDS);

    Batch.Recorded recorded = batch.record(); // another thread records meanwhile

    assertThat(recorded.notRecorded()).as("the key still being sent").containsExactly(key);
    assertThat(recorded.released()).isZero();
    assertThat(guard.find(key).map(IdempotencyRecord::state))
        .as("the key left claimed while its send runs")
        .contains(RecordState.IN_PROGRESS);

    sends.incrementAndGet(); // the provider accepted the send
    pool.submit(() -> batch.succeeded(item, "sent-1")).get(30, TimeUnit.SECONDS);

    assertThat(guard.find(key).map(IdempotencyRecord::state)).contains(RecordState.COMPLETED);
    String again = guard.execute(key, TTL, ctx -> "repeat-" + sends.incrementAndGet());
    assertThat(again).isEqualTo("sent-1");
    assertThat(sends).as("sends of the key within its window").hasValue(1);
  }

  /**
   * The same key reported failed after record(): released then (fenced), so the retry sends once.
   */
  @Test
  void aSendRunningWhenRecordIsCalledThatFailsIsReleasedByItsReport() throws Exception {
    String key = "probe-batch-inflight-failed:" + UUID.randomUUID();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = pool.submit(() -> batch.toSend().iterator().next()).get(30, TimeUnit.SECONDS);

    batch.record();
    pool.submit(() -> batch.failed(item, new RuntimeException("provider down")))
        .get(30, TimeUnit.SECONDS);

    assertThat(guard.find(key)).as("released by the failed report").isEmpty();
    assertThat(guard.execute(key, TTL, ctx -> "retry")).isEqualTo("retry");
    assertThatThrownBy(() -> batch.succeeded(item, "again"))
        .as("a second report of the item")
        .isInstanceOf(IllegalStateException.class);
  }

  /**
   * A key handed out on the thread that then calls record() (a loop that threw half-way, in a
   * try-with-resources block) and not reported: that thread may have given its send to an executor
   * ({@code BatchFanOutFromRecordingThreadProbeTest}), so record() leaves it claimed as it does a
   * key handed out on another thread, and its late report writes it. (Until fixfanout it was
   * released, and its report refused.)
   */
  @Test
  void aKeyHandedOutOnTheRecordingThreadIsLeftClaimedForItsReport() {
    String key = "probe-batch-same-thread:" + UUID.randomUUID();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Batch.Item item = batch.toSend().iterator().next();

    Batch.Recorded recorded = batch.record();

    assertThat(recorded.released()).isZero();
    assertThat(recorded.notRecorded()).containsExactly(key);
    assertThat(guard.find(key).map(IdempotencyRecord::state)).contains(RecordState.IN_PROGRESS);
    batch.succeeded(item, "late");
    assertThat(guard.find(key).map(IdempotencyRecord::state)).contains(RecordState.COMPLETED);
    assertThat(guard.execute(key, TTL, ctx -> "repeat")).isEqualTo("late");
  }

  /**
   * {@link Batch#recordReleasingUnreported()}: the caller says its sends on this thread ended and
   * what it did not report was not sent, so a key handed out here and not reported is released (a
   * repeat sends it), and its report after that is refused; one handed out on another thread still
   * stays claimed.
   */
  @Test
  void recordReleasingUnreportedReleasesOnlyKeysHandedOutOnItsThread() throws Exception {
    String here = "probe-batch-release-here:" + UUID.randomUUID();
    String elsewhere = "probe-batch-release-elsewhere:" + UUID.randomUUID();
    Batch<String> batch =
        guard.claimBatch(
            List.of(IdempotencyRequest.of(here, TTL), IdempotencyRequest.of(elsewhere, TTL)),
            ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    Batch.Item first = toSend.next();
    Batch.Item second = pool.submit(toSend::next).get(30, TimeUnit.SECONDS);
    assertThat(first.key()).isEqualTo(here);

    Batch.Recorded recorded = batch.recordReleasingUnreported();

    assertThat(recorded.released()).isEqualTo(1);
    assertThat(recorded.notRecorded()).containsExactly(elsewhere);
    assertThat(guard.find(here)).as("released: not sent").isEmpty();
    assertThat(guard.find(elsewhere).map(IdempotencyRecord::state))
        .contains(RecordState.IN_PROGRESS);
    assertThatThrownBy(() -> batch.succeeded(first, "late"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("record() was already called");
    batch.succeeded(second, "sent");
    assertThat(guard.execute(elsewhere, TTL, ctx -> "repeat")).isEqualTo("sent");
    assertThat(guard.execute(here, TTL, ctx -> "retry")).isEqualTo("retry");
  }

  /**
   * probeR on af14534: hasNext() returned true, record() began (on another thread, in the race;
   * here, to fix the order, on this one), and next() threw a bare NoSuchElementException. It now
   * fails fast with a {@link ConcurrentModificationException} that names the cause, as the JDK's
   * iterators do on a concurrent change (handing the key out would have it sent after record()
   * released it). Before af14534 next() handed the key out.
   */
  @Test
  void nextAfterRecordBeganFailsFastWithAClearError() {
    String key = "probe-batch-next:" + UUID.randomUUID();
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());
    Iterator<Batch.Item> toSend = batch.toSend().iterator();
    assertThat(toSend.hasNext()).isTrue();
    batch.record();
    assertThatThrownBy(toSend::next)
        .as("next() after hasNext() returned true, record() having begun since")
        .isInstanceOf(ConcurrentModificationException.class)
        .hasMessageContaining("record() began");
    assertThat(guard.find(key)).as("the key released, not sent").isEmpty();
  }

  /**
   * Several send loops (each its own iterator of toSend()) and reports racing record(), repeated:
   * no key is handed out twice, and after record() no key is left IN_PROGRESS (held a lease for
   * nothing). Counts the keys a loop was handed and whose report record() refused (the case above).
   */
  @Test
  void sendLoopsRacingRecordHandOutEachKeyOnceAndLeaveNoneClaimed() throws Exception {
    int rounds = 40;
    int keysPerBatch = 30;
    int loops = 4;
    int refusedReports = 0;
    int nextThrewTotal = 0;
    for (int round = 0; round < rounds; round++) {
      List<IdempotencyRequest> requests = new ArrayList<>();
      for (int i = 0; i < keysPerBatch; i++) {
        requests.add(IdempotencyRequest.of("probe-batch-race:" + UUID.randomUUID(), TTL));
      }
      Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
      Map<String, AtomicInteger> handOuts = new ConcurrentHashMap<>();
      AtomicInteger refused = new AtomicInteger();
      AtomicInteger nextThrew = new AtomicInteger();
      CountDownLatch start = new CountDownLatch(1);
      List<Future<?>> running = new ArrayList<>();
      for (int l = 0; l < loops; l++) {
        running.add(
            pool.submit(
                () -> {
                  start.await();
                  Iterator<Batch.Item> it = batch.toSend().iterator();
                  while (it.hasNext()) {
                    Batch.Item item;
                    try {
                      item = it.next();
                    } catch (NoSuchElementException
                        | ConcurrentModificationException afterHasNext) {
                      nextThrew.incrementAndGet(); // record() began (see
                      // nextAfterRecordBeganFailsFastWithAClearError), or
                      // another loop
                      // was handed the key this one's hasNext() found
                      break;
                    }
                    handOuts
                        .computeIfAbsent(item.key(), k -> new AtomicInteger())
                        .incrementAndGet();
                    try {
                      if (ThreadLocalRandom.current().nextBoolean()) {
                        batch.succeeded(item, "sent");
                      } else {
                        batch.failed(item, new RuntimeException("transient"));
                      }
                    } catch (IllegalStateException recordBegan) {
                      refused.incrementAndGet();
                    }
                  }
                  return null;
                }));
      }
      int spin = ThreadLocalRandom.current().nextInt(2000);
      start.countDown();
      for (int s = 0; s < spin; s++) {
        Thread.onSpinWait();
      }
      batch.record();
      for (Future<?> loop : running) {
        loop.get(60, TimeUnit.SECONDS);
      }
      refusedReports += refused.get();
      nextThrewTotal += nextThrew.get();
      for (Map.Entry<String, AtomicInteger> handOut : handOuts.entrySet()) {
        assertThat(handOut.getValue()).as("hand-outs of %s", handOut.getKey()).hasValue(1);
      }
      for (IdempotencyRequest request : requests) {
        Optional<IdempotencyRecord> found = guard.find(request.key());
        assertThat(found.map(IdempotencyRecord::state))
            .as("record of %s after record() (round %s)", request.key(), round)
            .satisfiesAnyOf(
                state -> assertThat(state).isEmpty(),
                state -> assertThat(state).contains(RecordState.COMPLETED));
      }
    }
    System.out.println(
        "probeR: reports refused because record() began: "
            + refusedReports
            + "; next() threw after hasNext() was true: "
            + nextThrewTotal);
  }
}
