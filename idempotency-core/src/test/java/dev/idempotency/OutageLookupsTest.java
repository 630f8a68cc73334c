package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.StoreOutageTest.SlowlyFailingStore;
import dev.idempotency.inmemory.InMemoryKeyStore;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Issue 37 (SPEC 14): an operator's lookups ({@code find}, {@code forget}, and the health check
 * that reads a key) go through the guard's breaker as calls do: refused at once while the store is
 * known to fail, instead of waiting for the store to fail each time; a failed lookup opens the
 * breaker for the calls too; and they work again once the store answers.
 */
class OutageLookupsTest {

  static final Duration TTL = Duration.ofHours(1);

  /** The store takes this long to fail, as a pool's connection wait does. */
  static final long FAILS_AFTER_MILLIS = 300;

  static String key() {
    return "outage:" + UUID.randomUUID();
  }

  @Test
  void afterACallSawTheStoreFailLookupsAndForgetsAreRefusedAtOnce() throws Exception {
    SlowlyFailingStore slow =
        new SlowlyFailingStore(InMemoryKeyStore.builder().build(), FAILS_AFTER_MILLIS);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(slow).build();
    String sent = key();
    guard.execute(sent, TTL, ctx -> "n_1");
    slow.down.set(true);
    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class);

    long slowest = 0;
    for (int i = 0; i < 5; i++) {
      long start = System.nanoTime();
      RuntimeException lookup = failure(() -> guard.find(sent));
      RuntimeException forget = failure(() -> guard.forget(sent));
      slowest = Math.max(slowest, System.nanoTime() - start);

      assertThat(lookup)
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("the store was not asked")
          .hasMessageContaining("Connection refused");
      assertThat(forget).isInstanceOf(KeyStoreException.class);
    }
    assertThat(TimeUnit.NANOSECONDS.toMillis(slowest))
        .as("the slowest lookup and forget, against the store's %d ms to fail", FAILS_AFTER_MILLIS)
        .isLessThan(FAILS_AFTER_MILLIS / 2);

    slow.down.set(false);
    IdempotencyGuardTest.await(
        () -> {
          try {
            return guard.find(sent).isPresent();
          } catch (KeyStoreException stillRefused) {
            return false;
          }
        },
        "a lookup to go through once the store answers again");
    assertThat(guard.execute(sent, TTL, ctx -> "n_2")).as("nothing was forgotten").isEqualTo("n_1");
  }

  /** What {@code call} threw, timed by the caller without an assertion library's first use. */
  private static RuntimeException failure(Runnable call) {
    try {
      call.run();
    } catch (RuntimeException e) {
      return e;
    }
    throw new AssertionError("expected a failure");
  }

  @Test
  void aFailedLookupOpensTheBreakerForCallsToo() throws Exception {
    SlowlyFailingStore slow =
        new SlowlyFailingStore(InMemoryKeyStore.builder().build(), FAILS_AFTER_MILLIS);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(slow).build();
    slow.down.set(true);
    assertThatThrownBy(() -> guard.find(key()))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("Connection refused");

    long start = System.nanoTime();
    RuntimeException call = failure(() -> guard.execute(key(), TTL, ctx -> "sent"));
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

    assertThat(call).isInstanceOf(KeyStoreException.class).hasMessageContaining("nothing was sent");
    assertThat(millis).isLessThan(FAILS_AFTER_MILLIS / 2);
    assertThat(slow.claims).as("no claim reached the failing store").hasValue(0);
  }
}
