package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * probe42h (hang39's pools, SPEC 14 "during a store outage each caller gets its error at once"): a
 * store that hangs rather than refuses (here a real PostgreSQL whose table another session holds
 * under an exclusive lock: each statement waits the store's 1 s bound). Async calls that arrived
 * before the first failure opened the guard's breaker were queued on the guard's own store-io pool
 * (16 threads, an unbounded queue); the breaker is checked when a call is submitted, not when its
 * queued claim runs, so every queued claim still asks the hung store and waits its full bound, 16
 * at a time. The last caller learns of the outage after (calls / 16) bounds, not one.
 */
@Tag("open-finding")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresOutageBacklogProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration BOUND = Duration.ofSeconds(1);
  static final int CALLS = 128;

  private EmbeddedPostgres postgres;
  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
    pool = Pools.of(postgres.getJdbcUrl("postgres", "postgres"), 24);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
    if (postgres != null) {
      postgres.close();
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
      List<CompletableFuture<Long>> failedAfterMillis = new ArrayList<>();
      for (int i = 0; i < CALLS; i++) {
        failedAfterMillis.add(
            guard
                .executeAsync(
                    "outage:" + UUID.randomUUID(),
                    TTL,
                    dev.idempotency.AsyncSender.of(
                        ctx -> {
                          sends.incrementAndGet();
                          return "sent";
                        }))
                .toCompletableFuture()
                .handle(
                    (value, failure) ->
                        failure == null
                            ? -1L
                            : TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)));
      }
      List<Long> latencies = new ArrayList<>();
      for (CompletableFuture<Long> call : failedAfterMillis) {
        latencies.add(call.get(120, TimeUnit.SECONDS));
      }
      locker.rollback();

      assertThat(sends).as("nothing sent during the outage").hasValue(0);
      assertThat(latencies).as("every call failed").doesNotContain(-1L);
      long slowest = latencies.stream().mapToLong(Long::longValue).max().orElseThrow();
      assertThat(slowest)
          .as(
              "ms until the last of %d callers got its error, with a %d ms store bound"
                  + " (each caller's ms: %s)",
              CALLS, BOUND.toMillis(), latencies)
          .isLessThan(3 * BOUND.toMillis());
    }
  }
}
