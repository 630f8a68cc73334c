package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Issue 39/37, SPEC 1 and 6, on a real PostgreSQL 17: outcomes the store could not take are written
 * in the background by {@code PendingOutcomes}, in chunks of the store's {@code maxBatchSize()}
 * (500 for JDBC). Some rows among them are unreadable (their {@code state} is not a state of the
 * store's, as {@link PostgresUnreadableClaimTest} makes one): the read-back of a chunk that holds
 * one throws {@code UnreadableRecordException}, the round counts that as a store failure and does
 * not try the later chunks at all; every round does the same until the unreadable claims are
 * dropped. With lease renewal off (a documented option), nothing drops them before their leases
 * end: the healthy outcomes in the later chunks are never written although the database answers,
 * they are abandoned with the rest when the leases end, and a retry takes those keys over and sends
 * again (before the fix: 257 of 735 healthy keys sent twice; with the sizes here, the 10 keys of
 * the second chunk). 510 healthy keys and 10 unreadable ones (one per 51, in the order the outcomes
 * were handed over, so that the first chunk holds one whatever order the outage's rounds left the
 * queue in); the database refuses connections while the sends end (each outcome's one attempt fails
 * within the 100 ms connection wait), then answers again within the lease. Now the store reports an
 * unreadable row as that key's outcome not written, and the guard writes every chunk.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresPendingOutcomeChunkTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);
  static final int HEALTHY = 510; // more than one chunk of 500
  static final int DAMAGED = 10; // one for every 51 healthy keys
  static final String TABLE = "pending_chunk";
  static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(60);

  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("pending_chunk", 24); // above the 16 store-io threads
    // the claims below start on 16 threads at once with a 100 ms connection wait: a pool still
    // opening its connections (one at a time, slowly on a loaded machine) would refuse some
    awaitTrue(
        () -> pool.getHikariPoolMXBean().getTotalConnections() >= 24, "the pool's 24 connections");
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void unreadableRowsDoNotKeepTheOtherOutcomesFromBeingWritten() throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName(TABLE)
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofMillis(100))
            .build();
    MutableClock clock = new MutableClock(Instant.parse("2026-12-05T00:00:00Z"));
    List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .lease(LEASE)
            .leaseRenewal(false)
            .completionAttempts(1) // to the background writer at the first failure
            .closeGracePeriod(Duration.ofSeconds(1))
            .listener(events::add)
            .build();
    try {
      // the healthy keys are claimed, then (a millisecond later) the keys whose rows become
      // unreadable; every send is in flight
      List<String> keys = new ArrayList<>();
      List<CompletableFuture<String>> healthySends = new ArrayList<>();
      List<CompletableFuture<String>> damagedSends = new ArrayList<>();
      List<CompletionStage<String>> answers = new ArrayList<>();
      AtomicInteger started = new AtomicInteger();
      for (int i = 0; i < HEALTHY; i++) {
        String key = "healthy:" + i + ":" + UUID.randomUUID();
        keys.add(key);
        answers.add(start(guard, key, healthySends, started));
      }
      awaitTrue(() -> allStarted(started, HEALTHY, answers), "every healthy send to start");
      clock.advance(Duration.ofMillis(1));
      for (int i = 0; i < DAMAGED; i++) {
        answers.add(start(guard, "damaged:" + i + ":" + UUID.randomUUID(), damagedSends, started));
      }
      awaitTrue(() -> allStarted(started, HEALTHY + DAMAGED, answers), "every send to start");
      damageNewestRows();

      // the database goes away; the sends end, one unreadable key among every 21 healthy ones
      refuseConnections();
      for (int i = 0; i < HEALTHY; i++) {
        if (i % (HEALTHY / DAMAGED) == 0) {
          damagedSends.get(i / (HEALTHY / DAMAGED)).complete("sent");
        }
        healthySends.get(i).complete("sent");
      }
      for (CompletionStage<String> answer : answers) {
        assertThat(answer.toCompletableFuture().get(120, TimeUnit.SECONDS)).isEqualTo("sent");
      }
      assertThat(count(events, Type.OUTCOME_NOT_RECORDED)).isEqualTo(HEALTHY + DAMAGED);

      // the database is back well within every lease (the guard's clock has not moved)
      allowConnections();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (completedRows() < HEALTHY && System.nanoTime() < deadline) {
        Thread.sleep(50); // polling, bounded above; the count then goes into the message only
      }
      int writtenWithinTenSeconds = completedRows();

      // the leases end; the outcomes not written by then are given up on
      clock.advance(LEASE.plusSeconds(1));
      awaitTrue(
          () -> completedRows() == HEALTHY || count(events, Type.OUTCOME_ABANDONED) > 0,
          "the healthy outcomes to be written or given up on");

      AtomicInteger secondSends = new AtomicInteger();
      for (String key : keys) {
        guard.execute(
            key,
            TTL,
            ctx -> {
              secondSends.incrementAndGet();
              return "sent again";
            });
      }

      assertThat(secondSends)
          .as(
              "healthy keys sent again by a retry; %s of %s healthy outcomes were written within"
                  + " 10 s of the database coming back",
              writtenWithinTenSeconds, HEALTHY)
          .hasValue(0);
    } finally {
      allowConnections();
      guard.close();
    }
  }

  private static CompletionStage<String> start(
      IdempotencyGuard guard,
      String key,
      List<CompletableFuture<String>> sends,
      AtomicInteger started) {
    CompletableFuture<String> send = new CompletableFuture<>();
    sends.add(send);
    return guard.executeAsync(
        key,
        TTL,
        ctx -> {
          started.incrementAndGet();
          return send;
        });
  }

  /** Whether every send started; fails at once if a claim failed instead. */
  private static boolean allStarted(
      AtomicInteger started, int expected, List<CompletionStage<String>> answers) {
    for (CompletionStage<String> answer : answers) {
      CompletableFuture<String> future = answer.toCompletableFuture();
      if (future.isCompletedExceptionally()) {
        future.join(); // throws the claim's failure
      }
    }
    return started.get() == expected;
  }

  private static long count(List<IdempotencyEvent> events, Type type) {
    return events.stream().filter(event -> event.type() == type).count();
  }

  /** Gives the newest rows (the last keys' claims) a state the store cannot read. */
  private void damageNewestRows() throws SQLException {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement()) {
      // a fixed test table name: no user input reaches this SQL
      assertThat(
              statement.executeUpdate(
                  "UPDATE "
                      + TABLE
                      + " SET state = 'DAMAGED' WHERE created_at = (SELECT max(created_at) FROM "
                      + TABLE
                      + ")"))
          .isEqualTo(DAMAGED);
    }
  }

  private int completedRows() {
    try (Connection connection = pool.getConnection();
        Statement statement = connection.createStatement();
        ResultSet rows =
            statement.executeQuery(
                "SELECT count(*) FROM " + TABLE + " WHERE state = 'COMPLETED'")) {
      rows.next();
      return rows.getInt(1);
    } catch (SQLException stillAway) {
      return -1;
    }
  }

  private void refuseConnections() {
    SharedPostgres.refuseConnections("pending_chunk");
  }

  private void allowConnections() {
    SharedPostgres.allowConnections("pending_chunk");
  }

  static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
    Poll.within(Duration.ofNanos(WAIT_NANOS)).until(what, condition::getAsBoolean);
  }
}
