package dev.idempotency;

import static dev.idempotency.IdempotencyGuardTest.await;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.tck.MutableClock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 39/37, SPEC 1: one key's record that the store cannot read must not keep the other outcomes
 * of its chunk, or of later chunks, from being written. The store here is the in-memory one with
 * chunks of 3 and a {@code completeAll} that fails a whole chunk with {@link
 * UnreadableRecordException} when one of its records is unreadable, as the JDBC store's read-back
 * and the DynamoDB store's parallel writes did (a store's own per-key answer is tested on
 * PostgreSQL: {@code PostgresPendingOutcomeChunkTest}). Before the fix the background writer put
 * every later chunk back untried after that failure, round after round, and a batch's recording
 * counted the whole chunk as not recorded.
 */
class UnreadableOutcomeChunkTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);
  static final int CHUNK = 3;
  static final int HEALTHY = 6; // two chunks after the one with the unreadable record

  final MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
  final DamagingStore store = new DamagingStore();
  final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(store)
          .clock(clock)
          .lease(LEASE)
          .leaseRenewal(false)
          .completionAttempts(1)
          .closeGracePeriod(Duration.ofSeconds(1))
          .listener(events::add)
          .build();

  @AfterEach
  void close() {
    store.down.set(false);
    guard.close();
  }

  @Test
  void anUnreadableRecordDoesNotKeepTheLaterChunksOfPendingOutcomesFromBeingWritten()
      throws Exception {
    String damaged = "damaged:" + UUID.randomUUID();
    List<String> healthy = new ArrayList<>();
    store.down.set(true); // every outcome goes to the background writer, the damaged one first
    assertThat(guard.execute(damaged, TTL, ctx -> "sent")).isEqualTo("sent");
    for (int i = 0; i < HEALTHY; i++) {
      String key = "healthy:" + i + ":" + UUID.randomUUID();
      healthy.add(key);
      assertThat(guard.execute(key, TTL, ctx -> "sent")).isEqualTo("sent");
    }
    assertThat(count(Type.OUTCOME_NOT_RECORDED)).isEqualTo(HEALTHY + 1);

    store.unreadable.add(Digests.keyId(damaged));
    store.down.set(false);
    await(
        () -> count(Type.OUTCOME_RECORDED_LATE) == HEALTHY,
        "every healthy outcome to be written (the guard's clock has not moved: every lease holds)");

    assertThat(count(Type.OUTCOME_ABANDONED)).as("the unreadable key's own").isEqualTo(1);
    AtomicInteger secondSends = new AtomicInteger();
    for (String key : healthy) {
      assertThat(guard.find(key).orElseThrow().state()).isEqualTo(RecordState.COMPLETED);
      guard.execute(key, TTL, ctx -> "sent again " + secondSends.incrementAndGet());
    }
    assertThat(secondSends).hasValue(0);
  }

  @Test
  void anUnreadableRecordInABatchIsThatKeysOutcomeNotRecordedAlone() {
    List<IdempotencyRequest> requests = new ArrayList<>();
    String damaged = "damaged:" + UUID.randomUUID();
    requests.add(IdempotencyRequest.of(damaged, TTL));
    for (int i = 0; i < HEALTHY; i++) {
      requests.add(IdempotencyRequest.of("healthy:" + i + ":" + UUID.randomUUID(), TTL));
    }
    Batch<String> batch = guard.claimBatch(requests, ResultCodec.string());
    store.unreadable.add(Digests.keyId(damaged));
    for (Batch.Item item : batch.toSend()) {
      batch.succeeded(item, "sent");
    }

    Batch.Recorded recorded = batch.record();

    assertThat(recorded.notRecorded()).containsExactly(damaged);
    assertThat(recorded.completed()).isEqualTo(HEALTHY);
  }

  private long count(Type type) {
    return events.stream().filter(event -> event.type() == type).count();
  }

  /**
   * The in-memory store with chunks of {@value #CHUNK}, an outage on demand (writes fail), and
   * records that cannot be read: {@code complete} of one throws {@link UnreadableRecordException},
   * and so does {@code completeAll} of a chunk that holds one, after writing the others (as the
   * JDBC store's fenced update did before its read-back). Every other call reaches the real store.
   */
  static final class DamagingStore extends ForwardingKeyStore {

    final Set<String> unreadable = ConcurrentHashMap.newKeySet();
    final AtomicBoolean down = new AtomicBoolean();

    DamagingStore() {
      super(InMemoryKeyStore.builder().build());
    }

    @Override
    public boolean complete(CompleteRequest request) {
      if (down.get()) {
        throw new KeyStoreException("injected outage", null);
      }
      if (unreadable.contains(request.keyId())) {
        throw new UnreadableRecordException("injected unreadable record", null);
      }
      return delegate.complete(request);
    }

    @Override
    public List<Boolean> completeAll(List<CompleteRequest> requests) {
      if (down.get()) {
        throw new KeyStoreException("injected outage", null);
      }
      List<Boolean> written = new ArrayList<>();
      boolean oneUnreadable = false;
      for (CompleteRequest request : requests) {
        oneUnreadable |= unreadable.contains(request.keyId());
        written.add(!unreadable.contains(request.keyId()) && delegate.complete(request));
      }
      if (oneUnreadable) {
        throw new UnreadableRecordException("injected unreadable record", null);
      }
      return written;
    }

    @Override
    public int maxBatchSize() {
      return CHUNK;
    }
  }
}
