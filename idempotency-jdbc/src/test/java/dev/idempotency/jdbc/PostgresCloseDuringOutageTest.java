package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Issue 37, SPEC 14 and 16 (shutdown mid-outage): a guard closed while its PostgreSQL is down
 * (nothing listens on the port: a stopped server), with nothing in flight, returns within its grace
 * period plus a small bound, not after {@link IdempotencyGuard#CLOSE_TIMEOUT} more. The pool is
 * built as Spring Boot builds it (setters, not started while the database is down) and as a started
 * one is ({@link Pools#of}).
 */
class PostgresCloseDuringOutageTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration GRACE = Duration.ofSeconds(1);

  /** What close() may take beyond its grace period: far below CLOSE_TIMEOUT's 10 s. */
  static final long BOUND_MILLIS = 1_000;

  @Test
  void closeDuringAnOutageWithNothingInFlightReturnsWithinTheGracePeriodOnABootStylePool()
      throws Exception {
    HikariDataSource pool = new HikariDataSource();
    pool.setJdbcUrl(downUrl());
    pool.setUsername("postgres");
    try {
      assertCloseIsPrompt(pool);
    } finally {
      pool.close();
    }
  }

  @Test
  void closeDuringAnOutageWithNothingInFlightReturnsWithinTheGracePeriodOnAStartedPool()
      throws Exception {
    try (HikariDataSource pool = Pools.of(downUrl() + "?user=postgres", 4)) {
      assertCloseIsPrompt(pool);
    }
  }

  private static String downUrl() {
    return "jdbc:postgresql://127.0.0.1:" + FreePorts.next() + "/postgres";
  }

  private static void assertCloseIsPrompt(HikariDataSource pool) throws InterruptedException {
    JdbcKeyStore store = JdbcKeyStore.builder(pool).build();
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).closeGracePeriod(GRACE).build();
    try {
      assertThatThrownBy(() -> guard.execute("down:" + UUID.randomUUID(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
      awaitProbeThread(); // the breaker is open: its probe now asks the stopped store
    } finally {
      java.util.concurrent.atomic.AtomicReference<Map<String, String>> during =
          new java.util.concurrent.atomic.AtomicReference<>();
      Thread dumper =
          new Thread(
              () -> {
                try {
                  // a snapshot of the guard's threads 3 s into close(), for the failure message
                  // only: not a wait the test's outcome depends on
                  Thread.sleep(3000);
                  during.set(guardThreads());
                } catch (InterruptedException e) {
                  // closed before
                }
              });
      dumper.setDaemon(true);
      dumper.start();
      long start = System.nanoTime();
      guard.close();
      dumper.interrupt();
      long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertThat(tookMillis)
          .as(
              "ms close() took with nothing in flight, grace %d ms; guard threads then: %s",
              GRACE.toMillis(), during.get())
          .isLessThan(GRACE.toMillis() + BOUND_MILLIS);
    }
  }

  /** Bounded polling until the guard's probe thread exists (the breaker scheduled its probe). */
  private static void awaitProbeThread() throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(10))
        .until(
            "the probe thread started",
            () -> guardThreads().keySet().stream().anyMatch(name -> name.contains("store-probe")));
  }

  private static Map<String, String> guardThreads() {
    Map<String, String> threads = new java.util.TreeMap<>();
    Thread.getAllStackTraces()
        .forEach(
            (thread, stack) -> {
              if (thread.getName().startsWith("idempotency-")) {
                StringBuilder top = new StringBuilder(thread.getState().toString());
                for (int i = 0; i < Math.min(6, stack.length); i++) {
                  top.append(" <- ").append(stack[i]);
                }
                threads.put(thread.getName(), top.toString());
              }
            });
    return threads;
  }
}
