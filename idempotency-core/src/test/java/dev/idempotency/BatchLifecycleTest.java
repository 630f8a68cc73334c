package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.MutableClock;
import java.lang.ref.WeakReference;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A batch's end: closed by try-with-resources when the send loop throws, or abandoned without
 * {@link Batch#record()}, in which case the keeper lets it go after the renewal limit.
 */
class BatchLifecycleTest {

  static final Duration TTL = Duration.ofHours(1);
  final KeyStore store = InMemoryKeyStore.builder().build();

  static List<IdempotencyRequest> requests(int count) {
    String run = UUID.randomUUID().toString();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      requests.add(IdempotencyRequest.of("lifecycle:" + run + ":" + i, TTL));
    }
    return requests;
  }

  /**
   * The loop throws while it holds the third key (handed out, not reported): close() writes what
   * was reported and releases the key never handed out, and leaves the third claimed (its send
   * might still run elsewhere: {@code BatchFanOutFromRecordingThreadProbeTest}); it comes back once
   * its lease runs out. Until fixfanout close() released it too.
   */
  @Test
  void aBatchClosedAfterItsSendLoopThrewWritesWhatWasReportedAndReleasesWhatWasNotHandedOut() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    List<IdempotencyRequest> requests = requests(4);
    List<String> sent = new ArrayList<>();

    assertThatThrownBy(
            () -> {
              try (Batch<String> batch = guard.claimBatch(requests, ResultCodec.string())) {
                for (Batch.Item item : batch.toSend()) {
                  if (sent.size() == 2) {
                    throw new IllegalStateException("the provider client broke");
                  }
                  sent.add(item.key());
                  batch.succeeded(item, "n:" + item.key());
                }
              }
            })
        .hasMessage("the provider client broke");
    Batch<String> again =
        IdempotencyGuard.builder().store(store).build().claimBatch(requests, ResultCodec.string());

    assertThat(again.replayed()).as("what was reported is recorded").hasSize(2);
    assertThat(again.claimedKeys())
        .as("the key never handed out was released, free at once")
        .containsExactly(requests.get(3).key());
    assertThat(again.inFlight())
        .as("the key the loop held when it threw, left claimed")
        .containsExactly(requests.get(2).key());
    again.close();
  }

  @Test
  void closeAfterRecordDoesNothing() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    Batch<String> batch = guard.claimBatch(requests(2), ResultCodec.string());
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "sent");
    }
    Batch.Recorded recorded = batch.record();

    batch.close();

    assertThat(recorded.completed()).isEqualTo(2);
  }

  /**
   * A batch dropped without {@code record()} (the loop threw, and nobody closed it) has its
   * reported outcome written in the background, is renewed no longer than the renewal limit, and
   * then nothing keeps it reachable.
   */
  @Test
  void anAbandonedBatchIsLetGoAfterTheRenewalLimitAndCollected() throws Exception {
    Duration lease = Duration.ofMillis(200);
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .lease(lease)
            .leaseRenewalLimit(Duration.ofMillis(600))
            .inFlightWait(Duration.ZERO)
            .build();
    List<IdempotencyRequest> requests = requests(3);
    WeakReference<Batch<String>> abandoned = abandon(guard, requests);

    await(() -> guard.settings().keeper.watchedCount() == 0, "the keeper to let go");
    await(
        () -> {
          System.gc();
          return abandoned.get() == null;
        },
        "the abandoned batch to be collected");
    clock.advance(lease.multipliedBy(2)); // the unrenewed leases run out, on the guard's clock
    Batch<String> again = guard.claimBatch(requests, ResultCodec.string());

    assertThat(again.replayed()).as("the reported outcome was written").hasSize(1);
    assertThat(again.claimedKeys()).as("the others' leases ran out").hasSize(2);
    again.close();
  }

  private static WeakReference<Batch<String>> abandon(
      IdempotencyGuard guard, List<IdempotencyRequest> requests) {
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    Batch.Item first = batch.toSend().iterator().next();
    batch.succeeded(first, "sent");
    return new WeakReference<>(batch);
  }

  /**
   * A campaign claimed in batches as it is iterated: a key of a later batch is not claimed while an
   * earlier batch is sent, a batch the loop left unrecorded is recorded when the next is asked for,
   * and a repeated campaign sends nothing.
   */
  @Test
  void claimBatchesClaimsOneBatchAtATime() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    IdempotencyGuard other = IdempotencyGuard.builder().store(store).build();
    List<IdempotencyRequest> requests = requests(2_500);
    List<Integer> sizes = new ArrayList<>();
    String notYetClaimed = null;

    for (Batch<String> batch : guard.claimBatches(requests, ResultCodec.string(), 1_000)) {
      if (sizes.isEmpty()) {
        // the last batch's keys are not claimed yet: another worker may send one of them now
        notYetClaimed = other.execute(requests.get(2_400).key(), TTL, ctx -> "other worker");
      }
      int sent = 0;
      for (Batch.Item item : batch.toSend()) {
        batch.succeeded(item, "n:" + item.key());
        sent++;
      }
      sizes.add(sent);
      if (sizes.size() == 1) {
        batch.record(); // the second batch is left to the iterator to record
      }
    }
    int resent = 0;
    for (Batch<String> again : guard.claimBatches(requests, ResultCodec.string(), 1_000)) {
      resent += again.claimedKeys().size();
      assertThat(again.inFlight()).isEmpty();
      again.record();
    }

    assertThat(notYetClaimed).isEqualTo("other worker");
    assertThat(sizes).containsExactly(1_000, 1_000, 499);
    assertThat(resent).as("every key was recorded, the second batch's by the iterator").isZero();
    assertThatThrownBy(() -> guard.claimBatches(requests, ResultCodec.string(), 0))
        .isInstanceOf(IllegalArgumentException.class);
  }

  /**
   * A key handed out and not reported yet may be sending now (on another thread, asynchronously):
   * iterating the batch again must not hand it out a second time.
   */
  @Test
  void iteratingAgainNeverHandsOutAKeyTwice() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    try (Batch<String> batch = guard.claimBatch(requests(5), ResultCodec.string())) {
      List<Batch.Item> first = new ArrayList<>();
      batch.toSend().forEach(first::add);
      List<Batch.Item> second = new ArrayList<>();
      batch.toSend().forEach(second::add);

      assertThat(first).hasSize(5);
      assertThat(second).as("keys handed out again while their sends may run").isEmpty();
      first.forEach(item -> batch.succeeded(item, "n:" + item.key()));
      assertThat(batch.record().notRecorded()).isEmpty();
    }
  }
}
