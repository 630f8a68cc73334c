package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** What an {@link IdempotencyObserver} sees of a guard: events, calls, store operations. */
class ObserverTest {

  static final Duration TTL = Duration.ofHours(1);

  /** Records everything it is told, as text. */
  static final class Recorder implements IdempotencyObserver {
    final List<String> seen = new CopyOnWriteArrayList<>();

    @Override
    public void onEvent(IdempotencyEvent event) {
      seen.add("event " + event.type() + " " + event.operation());
    }

    @Override
    public CallObservation onCallStart(String operation, String store) {
      seen.add("start " + operation + " " + store);
      return new CallObservation() {
        @Override
        public void onEvent(IdempotencyEvent event) {
          seen.add("call-event " + event.type());
        }

        @Override
        public Scope openScope() {
          seen.add("scope");
          return () -> seen.add("scope-closed");
        }

        @Override
        public void onEnd(Throwable failure) {
          seen.add("end " + (failure == null ? "ok" : failure.getClass().getSimpleName()));
        }
      };
    }

    @Override
    public void onStoreOperation(String store, String operation, long nanos, Throwable failure) {
      seen.add("store " + store + " " + operation + (failure == null ? "" : " failed"));
    }
  }

  final Recorder recorder = new Recorder();
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final IdempotencyGuard guard =
      IdempotencyGuard.builder()
          .store(InMemoryKeyStore.builder().build())
          .observer(recorder)
          .build();

  static String key() {
    return "otp:" + UUID.randomUUID();
  }

  /**
   * A raw key whose first part is an id ({@code user-42:welcome}) would give each user its own
   * operation: past the guard's cap, operations are reported as {@code other}.
   */
  @Test
  void operationNamesPastTheCapAreReportedAsOther() {
    List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
    IdempotencyGuard capped =
        IdempotencyGuard.builder()
            .store(InMemoryKeyStore.builder().build())
            .maxOperationNames(100)
            .listener(events::add)
            .build();

    for (int user = 0; user < 150; user++) {
      capped.execute("user-" + user + ":welcome:" + UUID.randomUUID(), TTL, ctx -> "sent");
    }
    capped.execute("user-7:welcome:" + UUID.randomUUID(), TTL, ctx -> "sent");

    List<String> operations = events.stream().map(IdempotencyEvent::operation).distinct().toList();
    assertThat(operations).hasSize(101).contains("user-0", "user-99", "other");
    assertThat(operations).doesNotContain("user-100", "user-149");
    assertThat(events.get(events.size() - 1).operation())
        .as("a name admitted before the cap keeps its name")
        .isEqualTo("user-7");
  }

  @Test
  void aFirstSendIsOneCallWithItsEventsAndTimedStoreOperations() {
    guard.execute(key(), TTL, ctx -> "n_1");

    assertThat(recorder.seen)
        .containsExactly(
            "start otp memory",
            "scope",
            "store memory claim",
            "event CLAIMED otp",
            "call-event CLAIMED",
            "store memory complete",
            "event COMPLETED otp",
            "call-event COMPLETED",
            "scope-closed",
            "end ok");
  }

  @Test
  void aReplayAndAFailureEndTheirCalls() {
    String key = key();
    guard.execute(key, TTL, ctx -> "n_1");
    recorder.seen.clear();

    guard.execute(key, TTL, ctx -> "n_2");
    assertThatThrownBy(
            () ->
                guard.execute(
                    key(),
                    TTL,
                    ctx -> {
                      throw new IllegalStateException("provider down");
                    }))
        .isInstanceOf(IllegalStateException.class);

    assertThat(recorder.seen)
        .contains(
            "call-event REPLAYED", "end ok", "event RELEASED otp", "end IllegalStateException")
        .contains("store memory release");
  }

  @Test
  void theOperationIsTheRequestsNeverTheKey() {
    guard.executeForOutcome(
        IdempotencyRequest.of("otp:+15550100042:9f3a", TTL).withOperation("otp-sms"),
        ResultCodec.string(),
        ctx -> "n_1");

    assertThat(recorder.seen).contains("start otp-sms memory", "event COMPLETED otp-sms");
    assertThat(String.join("\n", recorder.seen)).doesNotContain("+15550100042");
  }

  @Test
  void anAsyncCallIsFollowedToItsEnd() throws Exception {
    String result =
        guard
            .executeAsync(key(), TTL, ctx -> CompletableFuture.supplyAsync(() -> "n_1"))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);

    assertThat(result).isEqualTo("n_1");
    assertThat(recorder.seen).startsWith("start otp memory");
    awaitEnd();
    assertThat(recorder.seen).contains("call-event COMPLETED", "end ok");
  }

  private void awaitEnd() throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(5))
        .until("the observer's end", () -> recorder.seen.contains("end ok"));
  }

  @Test
  void aBlockingStoreIsTimedOnItsExecutorToo() throws Exception {
    IdempotencyGuard onBlocking =
        IdempotencyGuard.builder().store(store).observer(recorder).build();

    onBlocking
        .executeAsync(key(), TTL, ctx -> CompletableFuture.completedFuture("n_1"))
        .toCompletableFuture()
        .get(30, TimeUnit.SECONDS);

    awaitEnd();
    assertThat(recorder.seen)
        .contains("start otp observedkeystore", "store observedkeystore claim", "end ok");
  }

  @Test
  void batchEventsReachTheObserver() {
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key(), TTL)), ResultCodec.string());
    batch.succeeded(batch.toSend().iterator().next(), "n_1");
    batch.record();

    assertThat(recorder.seen)
        .contains("store memory claim_all", "event CLAIMED otp", "event COMPLETED otp");
  }

  @Test
  void anObserverThatThrowsBreaksNoCall() {
    IdempotencyGuard throwing =
        IdempotencyGuard.builder()
            .store(InMemoryKeyStore.builder().build())
            .observer(
                new IdempotencyObserver() {
                  @Override
                  public void onEvent(IdempotencyEvent event) {
                    throw new IllegalStateException("observer bug");
                  }

                  @Override
                  public CallObservation onCallStart(String operation, String store) {
                    throw new IllegalStateException("observer bug");
                  }

                  @Override
                  public void onStoreOperation(
                      String store, String operation, long nanos, Throwable failure) {
                    throw new IllegalStateException("observer bug");
                  }
                })
            .build();

    String key = key();
    String first = throwing.execute(key, TTL, ctx -> "n_1");
    String replay = throwing.execute(key, TTL, ctx -> "n_2");

    assertThat(first).isEqualTo("n_1");
    assertThat(replay).isEqualTo("n_1");
  }

  @Test
  void withoutObserversTheStoreIsCalledAsGiven() {
    IdempotencyGuard plain = IdempotencyGuard.builder().store(store).build();

    assertThat(plain.store()).isSameAs(store);
    assertThat(guard.store()).isInstanceOf(InMemoryKeyStore.class);
    assertThat(Type.values()).contains(Type.COMPLETED);
  }
}
