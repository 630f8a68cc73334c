package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.tck.ObservedKeyStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The opt-in near cache: replays from memory, within its bounds, and never past a window. */
class NearCacheTest {

  static final Duration TTL = Duration.ofHours(1);
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());

  static String key() {
    return "near:" + UUID.randomUUID();
  }

  IdempotencyGuard guard(NearCache cache) {
    return IdempotencyGuard.builder().store(store).nearCache(cache).build();
  }

  @Test
  void aRepeatAfterTheFirstReplayIsAnsweredFromMemory() throws Exception {
    IdempotencyGuard guard = guard(NearCache.of(1_000, Duration.ofMinutes(1)));
    String key = key();
    guard.execute(key, TTL, ctx -> "n_1");
    guard.execute(key, TTL, ctx -> "n_2"); // replayed by the store, and kept
    int claims = store.claims.get();

    Outcome<String> fromMemory =
        guard.executeForOutcome(
            IdempotencyRequest.of(key, TTL), ResultCodec.string(), ctx -> "n_3");
    String async =
        guard.executeAsync(key, TTL, ctx -> null).toCompletableFuture().get(30, TimeUnit.SECONDS);
    Batch<String> batch =
        guard.claimBatch(List.of(IdempotencyRequest.of(key, TTL)), ResultCodec.string());

    assertThat(fromMemory.value()).isEqualTo("n_1");
    assertThat(fromMemory.replayed()).isTrue();
    assertThat(async).isEqualTo("n_1");
    assertThat(batch.replayed().get(key).value()).isEqualTo("n_1");
    assertThat(store.claims.get()).as("no store call for the cached replays").isEqualTo(claims);
    batch.close();
  }

  @Test
  void aDifferentFingerprintIsStillRefusedByTheStore() {
    IdempotencyGuard guard = guard(NearCache.of(1_000, Duration.ofMinutes(1)));
    String key = key();
    IdempotencyRequest first = IdempotencyRequest.of(key, TTL).withFingerprint("body-a");
    guard.executeForOutcome(first, ResultCodec.string(), ctx -> "n_1");
    guard.executeForOutcome(first, ResultCodec.string(), ctx -> "n_2");

    assertThatThrownBy(
            () ->
                guard.executeForOutcome(
                    IdempotencyRequest.of(key, TTL).withFingerprint("body-b"),
                    ResultCodec.string(),
                    ctx -> "n_3"))
        .isInstanceOf(IdempotencyKeyReuseException.class);
  }

  @Test
  void forgetOnThisInstanceClearsTheEntry() {
    IdempotencyGuard guard = guard(NearCache.of(1_000, Duration.ofMinutes(1)));
    String key = key();
    guard.execute(key, TTL, ctx -> "n_1");
    guard.execute(key, TTL, ctx -> "n_2");

    assertThat(guard.forget(key)).isTrue();

    assertThat(guard.execute(key, TTL, ctx -> "resent")).isEqualTo("resent");
  }

  /** Never past the record's window: an entry ends with the window, on the store's time. */
  @Test
  void anEntryNeverOutlivesItsRecordsWindow() throws Exception {
    MutableClock clock = new MutableClock(Instant.parse("2030-01-01T00:00:00Z"));
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .nearCache(NearCache.of(1_000, Duration.ofDays(1)))
            .build();
    String key = key();
    guard.execute(key, Duration.ofMinutes(10), ctx -> "n_1");
    clock.advance(Duration.ofMinutes(9).plusSeconds(59).plusMillis(900));
    guard.execute(key, Duration.ofMinutes(10), ctx -> "n_2"); // cached, 100 ms of window left

    // the entry's bound, the 100 ms of window left, runs on real time (a near cache has no clock to
    // inject): a sleep that lasts longer on a busy machine only makes the bound surer to have
    // passed
    Thread.sleep(200);
    clock.advance(Duration.ofSeconds(1)); // the store's time passes the window's end

    assertThat(guard.execute(key, Duration.ofMinutes(10), ctx -> "new window"))
        .as("the cache, though allowed a day, did not answer past the window")
        .isEqualTo("new window");
  }

  @Test
  void settingsAreChecked() {
    assertThatThrownBy(() -> NearCache.of(0, Duration.ofSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> NearCache.of(10, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
