package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * SPEC 1 and 6 on a real PostgreSQL 17 (issue 39/37): the database refuses the store's connections
 * (its database closed to connections, the open ones terminated) after a call claimed its key and
 * before its outcome is written. The caller gets its result at once; the guard goes on writing the
 * outcome in the background: a database back within the lease ends COMPLETED and a repeat replays
 * without a second send; one that stays away past the lease (the guard's clock moved past it) is
 * given up on; and {@code close()} returns within its grace period with the write abandoned.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresOutcomeWriteRetryTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);
  static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

  private HikariDataSource pool;
  private JdbcKeyStore store;
  private MutableClock clock;
  private final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("outcome_writes", 4);
    store =
        JdbcKeyStore.builder(pool)
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofMillis(500))
            .build();
    // the pool's first connection and the dialect's detection may take longer than the 500 ms
    // connectionWait on a busy machine: the store is warmed up before the cases time it
    Poll.within(Duration.ofSeconds(60))
        .ignoring(KeyStoreException.class)
        .until("the store answers", () -> store.find("warm-up", Instant.now()).isEmpty());
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  @BeforeEach
  void reset() {
    events.clear();
    clock = new MutableClock(Instant.parse("2026-12-05T00:00:00Z"));
  }

  private IdempotencyGuard guard(Duration closeGrace) {
    return IdempotencyGuard.builder()
        .store(store)
        .clock(clock)
        .lease(LEASE)
        .closeGracePeriod(closeGrace)
        .listener(events::add)
        .build();
  }

  @Test
  void anOutcomeTheDatabaseRefusedIsWrittenOnceItIsBackWithinTheLease() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofSeconds(5));
    String key = "restart:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    try {
      String first =
          guard.execute(
              key,
              TTL,
              ctx -> {
                sends.incrementAndGet();
                refuseConnections();
                return "sent";
              });
      assertThat(events).extracting(IdempotencyEvent::type).contains(Type.OUTCOME_NOT_RECORDED);
      clock.advance(LEASE.dividedBy(2));
      allowConnections();

      awaitTrue(() -> completed(guard, key), "the outcome written in the background");
      String repeat = guard.execute(key, TTL, ctx -> "sent twice: " + sends.incrementAndGet());

      assertThat(first).isEqualTo("sent");
      assertThat(repeat).isEqualTo("sent");
      assertThat(sends).hasValue(1);
      // the write's end is reported after the store took it: it may come after the repeat
      awaitTrue(
          () ->
              events.stream()
                  .anyMatch(
                      event ->
                          event.type() == Type.OUTCOME_RECORDED_LATE
                              || event.type() == Type.OUTCOME_ABANDONED),
          "the background write's end reported");
      assertThat(events)
          .extracting(IdempotencyEvent::type)
          .contains(Type.OUTCOME_RECORDED_LATE)
          .doesNotContain(Type.OUTCOME_ABANDONED);
    } finally {
      allowConnections();
      guard.close();
    }
  }

  @Test
  void anAsyncOutcomeTheDatabaseRefusedIsWrittenOnceItIsBack() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofSeconds(5));
    String key = "async:" + UUID.randomUUID();
    try {
      String first =
          guard
              .executeAsync(
                  key,
                  TTL,
                  ctx -> {
                    refuseConnections();
                    return CompletableFuture.completedFuture("sent");
                  })
              .toCompletableFuture()
              .get(30, TimeUnit.SECONDS);
      allowConnections();

      awaitTrue(() -> completed(guard, key), "the outcome written in the background");

      assertThat(first).isEqualTo("sent");
      assertThat(guard.execute(key, TTL, ctx -> "sent twice")).isEqualTo("sent");
    } finally {
      allowConnections();
      guard.close();
    }
  }

  @Test
  void aDatabaseAwayPastTheLeaseIsGivenUpOnByTheGuardsClock() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofSeconds(5));
    String key = "away:" + UUID.randomUUID();
    try {
      guard.execute(
          key,
          TTL,
          ctx -> {
            refuseConnections();
            return "sent";
          });
      clock.advance(LEASE.plusSeconds(1));

      awaitTrue(() -> has(Type.OUTCOME_ABANDONED), "the background write to give up");
      allowConnections();

      assertThat(events)
          .extracting(IdempotencyEvent::type)
          .doesNotContain(Type.OUTCOME_RECORDED_LATE);
      assertThat(stateOnceTheStoreAnswers(guard, key)).isEqualTo(RecordState.IN_PROGRESS);
    } finally {
      allowConnections();
      guard.close();
    }
  }

  @Test
  void closeReturnsWithinItsGraceAndAbandonsWhatTheDatabaseDidNotTake() throws Exception {
    IdempotencyGuard guard = guard(Duration.ofMillis(500));
    String key = "close:" + UUID.randomUUID();
    try {
      guard.execute(
          key,
          TTL,
          ctx -> {
            refuseConnections();
            return "sent";
          });
      long start = System.nanoTime();
      guard.close();
      long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      allowConnections();

      assertThat(closeMillis).as("close() within its grace and a store call").isLessThan(5_000);
      assertThat(events).extracting(IdempotencyEvent::type).contains(Type.OUTCOME_ABANDONED);
      try (IdempotencyGuard reader = guard(Duration.ZERO)) {
        assertThat(stateOnceTheStoreAnswers(reader, key))
            .as("abandoned as a crash would leave it, not released")
            .isEqualTo(RecordState.IN_PROGRESS);
      }
    } finally {
      allowConnections();
    }
  }

  /**
   * Issue 37: close() starts during an outage (the breaker open, its probe asking the refusing
   * database) while a call is still running; the database is back within the grace period, so the
   * call's outcome is written and close() returns once it is, within its grace, not {@link
   * IdempotencyGuard#CLOSE_TIMEOUT} later.
   */
  @Test
  void aCallInFlightWhenCloseStartsMidOutageHasItsOutcomeWrittenOnceTheDatabaseIsBack()
      throws Exception {
    Duration grace = Duration.ofSeconds(10);
    IdempotencyGuard guard = guard(grace);
    String key = "inflight:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    java.util.concurrent.CountDownLatch inSend = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    CompletableFuture<String> call =
        CompletableFuture.supplyAsync(
            () ->
                guard.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      refuseConnections();
                      inSend.countDown();
                      release.await(30, TimeUnit.SECONDS);
                      return "sent";
                    }));
    try {
      assertThat(inSend.await(30, TimeUnit.SECONDS)).as("the call is in its send").isTrue();
      awaitTrue(
          () -> {
            try {
              guard.execute(
                  "outage:" + UUID.randomUUID(), TTL, ctx -> "sent: " + sends.incrementAndGet());
              return false;
            } catch (KeyStoreException refused) {
              return refused.getMessage().contains("nothing was sent. Last failure");
            }
          },
          "the breaker to open (a claim refused without asking the database)");
      long start = System.nanoTime();
      CompletableFuture<Void> closing = CompletableFuture.runAsync(guard::close);
      awaitTrue(
          () -> {
            try {
              guard.execute(
                  "closing:" + UUID.randomUUID(), TTL, ctx -> "sent: " + sends.incrementAndGet());
              return false;
            } catch (IllegalStateException closed) {
              return true;
            } catch (KeyStoreException notYetClosing) {
              return false;
            }
          },
          "close() to refuse new calls");
      allowConnections();
      release.countDown();

      closing.get(60, TimeUnit.SECONDS);
      long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertThat(call.get(30, TimeUnit.SECONDS)).isEqualTo("sent");
      assertThat(closeMillis)
          .as("ms close() took: it waits for the call's outcome, within its grace")
          .isLessThan(grace.toMillis());
      assertThat(sends).as("only the call in flight sent").hasValue(1);
      assertThat(events).extracting(IdempotencyEvent::type).doesNotContain(Type.OUTCOME_ABANDONED);
      try (IdempotencyGuard reader = guard(Duration.ZERO)) {
        assertThat(stateOnceTheStoreAnswers(reader, key))
            .as("the outcome written before close() returned")
            .isEqualTo(RecordState.COMPLETED);
      }
    } finally {
      release.countDown();
      allowConnections();
    }
  }

  private boolean has(Type type) {
    return events.stream().anyMatch(event -> event.type() == type);
  }

  /** The key's state, asked until the pool has a connection again (bounded). */
  static RecordState stateOnceTheStoreAnswers(IdempotencyGuard guard, String key)
      throws InterruptedException {
    RecordState[] state = new RecordState[1];
    awaitTrue(
        () -> {
          try {
            state[0] = guard.find(key).orElseThrow().state();
            return true;
          } catch (KeyStoreException notYet) {
            return false;
          }
        },
        "the store to answer again");
    return state[0];
  }

  /** Whether the key's record is COMPLETED; false while the database refuses the store. */
  static boolean completed(IdempotencyGuard guard, String key) {
    try {
      return guard.find(key).map(r -> r.state() == RecordState.COMPLETED).orElse(false);
    } catch (KeyStoreException stillAway) {
      return false;
    }
  }

  /** The database takes no new connection, and the pool's open ones are terminated. */
  private void refuseConnections() {
    SharedPostgres.refuseConnections("outcome_writes");
  }

  private void allowConnections() {
    SharedPostgres.allowConnections("outcome_writes");
  }

  static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
    Poll.within(Duration.ofNanos(WAIT_NANOS)).until(what, condition::getAsBoolean);
  }
}
