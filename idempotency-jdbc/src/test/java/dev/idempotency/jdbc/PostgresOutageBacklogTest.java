package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * SPEC 14 "during a store outage each caller gets its error at once" (issue 37 item 17): a store
 * that hangs rather than refuses (here a real PostgreSQL whose table another session holds under an
 * exclusive lock: each claim waits the store's 1 s bound, plus the short read after its cancelled
 * insert, about 1.1 to 1.3 s; until issue 37's operation deadline each of the claim's two
 * statements waited a bound of its own, about 2.1 s). Async calls that arrived before the first
 * failure opened the guard's breaker are queued on the guard's own store-io pool (16 threads); each
 * queued claim asks the breaker when it starts, so once the first claims fail the rest are refused
 * at once instead of each waiting the hung store's bound, 16 at a time (before the fix: 8 steps of
 * about 2.1 s, the last caller after 16.9 s).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresOutageBacklogTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration BOUND = Duration.ofSeconds(1);
  static final int CALLS = 128;

  /** Threads of the guard's default store-io pool (DefaultExecutors.STORE_IO_THREADS). */
  static final int STORE_IO_THREADS = 16;

  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("outage_backlog", 24);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void callersQueuedBeforeTheBreakerOpenedGetTheirErrorWithinABound() throws Exception {
    String table = "outage_backlog";
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(table)
            .createSchemaIfMissing(true)
            .operationTimeout(BOUND)
            .build();
    AtomicInteger sends = new AtomicInteger();
    try (IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
        Connection locker = pool.getConnection()) {
      assertThat(guard.execute("warm:" + UUID.randomUUID(), TTL, ctx -> "sent")).isEqualTo("sent");
      locker.setAutoCommit(false);
      try (Statement lock = locker.createStatement()) {
        lock.execute("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"); // fixed test name
      }

      long start = System.nanoTime();
      List<CompletableFuture<Throwable>> failures = new ArrayList<>();
      List<CompletableFuture<Long>> failedAfterMillis = new ArrayList<>();
      for (int i = 0; i < CALLS; i++) {
        CompletableFuture<String> call =
            guard
                .executeAsync(
                    "outage:" + UUID.randomUUID(),
                    TTL,
                    dev.idempotency.AsyncSender.of(
                        ctx -> {
                          sends.incrementAndGet();
                          return "sent";
                        }))
                .toCompletableFuture();
        failures.add(call.handle((value, failure) -> failure));
        failedAfterMillis.add(
            call.handle(
                (value, failure) ->
                    failure == null
                        ? -1L
                        : TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)));
      }
      List<Long> latencies = new ArrayList<>();
      for (CompletableFuture<Long> call : failedAfterMillis) {
        latencies.add(call.get(120, TimeUnit.SECONDS));
      }
      long askedTheStore = 0;
      for (CompletableFuture<Throwable> failure : failures) {
        Throwable cause = unwrap(failure.get());
        assertThat(cause).isInstanceOf(KeyStoreException.class);
        if (!cause.getMessage().contains("nothing was sent. Last failure")) {
          askedTheStore++; // not the breaker's refusal: this claim waited for the store
        }
      }
      locker.rollback();

      assertThat(sends).as("nothing sent during the outage").hasValue(0);
      assertThat(latencies).as("every call failed").doesNotContain(-1L);
      long first = latencies.stream().mapToLong(Long::longValue).min().orElseThrow();
      long slowest = latencies.stream().mapToLong(Long::longValue).max().orElseThrow();
      assertThat(slowest - first)
          .as(
              "ms from the first to the last of %d callers' errors, with a %d ms store bound"
                  + " (each caller's ms: %s)",
              CALLS, BOUND.toMillis(), latencies)
          .isLessThan(3 * BOUND.toMillis());
      assertThat(slowest).as("ms until the last caller got its error").isLessThan(8_000);
      assertThat(askedTheStore)
          .as("claims that waited for the hung store rather than the breaker's refusal")
          .isLessThanOrEqualTo(STORE_IO_THREADS);
    }
  }

  private static Throwable unwrap(Throwable failure) {
    Throwable t = failure;
    while (t instanceof java.util.concurrent.CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }
}
