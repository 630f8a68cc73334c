package dev.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.tck.ObservedKeyStore;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * SPEC section 14, during a store outage: each caller gets its error at once, the log gets one WARN
 * line (not a stack trace per call), and the store answers again without a restart; and repeats
 * waiting for an in-flight key back off instead of polling the store hot.
 */
class StoreOutageTest {

  static final Duration TTL = Duration.ofHours(1);
  final ObservedKeyStore store = new ObservedKeyStore(InMemoryKeyStore.builder().build());
  final ExecutorService pool = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() throws InterruptedException {
    pool.shutdownNow();
    assertThat(pool.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
  }

  static String key() {
    return "outage:" + UUID.randomUUID();
  }

  @Test
  void anOutageLogsOneWarningLineRefusesCallsAtOnceAndEndsWhenTheStoreAnswers() throws Exception {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    int sent = 0;
    int refused = 0;
    int claimsWhileDown;
    try {
      store.failClaims.set(Integer.MAX_VALUE);
      for (int i = 0; i < 200; i++) {
        try {
          guard.execute(key(), TTL, ctx -> "sent");
          sent++;
        } catch (KeyStoreException expected) {
          refused++;
        }
      }
      claimsWhileDown = store.claims.get();
      store.failClaims.set(0);
      awaitAnswer(guard);
    } finally {
      System.setErr(original);
    }
    String log = captured.toString(StandardCharsets.UTF_8);

    assertThat(sent).isZero();
    assertThat(refused).isEqualTo(200);
    assertThat(claimsWhileDown)
        .as("after a few failures, calls are refused without asking the store, but for probes")
        .isLessThan(20);
    assertThat(log.lines().filter(line -> line.contains("WARN"))).hasSize(1);
    assertThat(log).doesNotContain("\tat ").contains("key store is failing");
    assertThat(log).contains("answers again");
  }

  private static void awaitAnswer(IdempotencyGuard guard) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        guard.execute(key(), TTL, ctx -> "sent");
        return;
      } catch (KeyStoreException stillRefused) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("the guard did not try the store again", stillRefused);
        }
        Thread.sleep(20);
      }
    }
  }

  @Test
  void aRefusedCallSaysTheStoreIsFailingAndWhy() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    store.failClaims.set(Integer.MAX_VALUE);
    for (int i = 0; i < StoreOutages.FAILURES_BEFORE_FAST_FAIL; i++) {
      assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
    }

    assertThatThrownBy(() -> guard.execute(key(), TTL, ctx -> "sent"))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("key store is failing")
        .hasMessageContaining("nothing was sent");
  }

  /** Five repeats waiting two seconds for one in-flight key back off: few claims each. */
  @Test
  void repeatsWaitingForAnInFlightKeyBackOff() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofSeconds(2)).build();
    String key = key();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Future<String> first =
        pool.submit(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sending.countDown();
                      release.await(30, TimeUnit.SECONDS);
                      return "first";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
    int before = store.claims.get();
    List<Future<Object>> repeats = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      repeats.add(
          pool.submit(
              () -> {
                try {
                  return guard.execute(key, TTL, ctx -> "repeat");
                } catch (IdempotencyInProgressException e) {
                  return e;
                }
              }));
    }
    for (Future<Object> repeat : repeats) {
      assertThat(repeat.get(30, TimeUnit.SECONDS))
          .isInstanceOf(IdempotencyInProgressException.class);
    }
    int claims = store.claims.get() - before;
    release.countDown();
    first.get(30, TimeUnit.SECONDS);

    assertThat(claims).as("claims by five repeats over two seconds").isBetween(5, 65);
  }
}
