package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression tests of joined transactions (issue 38) on a real PostgreSQL; both failed before their
 * fixes.
 *
 * <p>SPEC 17: a concurrent repeat "waits at most {@code inFlightWait} ... and never holds a
 * connection longer than that"): on PostgreSQL {@code lock_timeout} bounds each lock wait, not the
 * claim. Two repeats wait on an open transaction; it rolls back late in their wait; one repeat
 * claims the key and holds it, and the other starts a fresh {@code lock_timeout} on the new holder:
 * it gives up after about twice {@code inFlightWait}, holding its connection all along. With more
 * holders in turn the wait grows further.
 *
 * <p>SPEC 5 (mixing modes): a repeat in the usual mode of a key whose joined transaction is still
 * open blocks on the row lock until the store's operation timeout cancels it, and gets a {@link
 * dev.idempotency.KeyStoreException} ("the store failed") and a store-error event, where an
 * in-flight key gives {@link IdempotencyInProgressException} (409) after {@code inFlightWait}.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class JoinedPostgresWaitTest {

  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration IN_FLIGHT_WAIT = Duration.ofSeconds(6);
  private static final Duration SLACK = Duration.ofSeconds(2);

  private HikariDataSource pool;
  private JdbcKeyStore store;
  private ExecutorService threads;

  @BeforeAll
  void start() throws Exception {
    pool = SharedPostgres.pool("joined_wait", 8);
    store =
        JdbcKeyStore.builder(pool)
            .tableName("idem_wait_probe")
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofSeconds(30))
            .build();
    threads = Executors.newCachedThreadPool();
  }

  @AfterAll
  void stop() throws Exception {
    threads.shutdownNow();
    pool.close();
  }

  @Test
  void aRepeatGivesUpWithinInFlightWaitWhenTheKeyChangesHands() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).inFlightWait(IN_FLIGHT_WAIT).build();
    String key = "wait-bound:" + UUID.randomUUID();
    CountDownLatch firstHolds = new CountDownLatch(1);
    CountDownLatch firstRollsBack = new CountDownLatch(1);
    CountDownLatch nextHolderMayEnd = new CountDownLatch(1);

    Future<?> first =
        threads.submit(
            () ->
                inRolledBackTransaction(
                    guard,
                    key,
                    () -> {
                      firstHolds.countDown();
                      firstRollsBack.await(60, TimeUnit.SECONDS);
                    }));
    assertThat(firstHolds.await(60, TimeUnit.SECONDS)).isTrue();

    List<Future<Object>> repeats = new ArrayList<>();
    long repeatsStarted = System.nanoTime();
    for (int i = 0; i < 2; i++) {
      repeats.add(
          threads.submit(
              () -> {
                long start = System.nanoTime();
                try {
                  inRolledBackTransaction(
                      guard, key, () -> nextHolderMayEnd.await(60, TimeUnit.SECONDS));
                  return "claimed";
                } catch (IdempotencyInProgressException e) {
                  return Duration.ofNanos(System.nanoTime() - start);
                }
              }));
    }
    awaitLockWaiters(2);
    // the first transaction ends late in the repeats' wait, well before it runs out
    long rollBackAt = repeatsStarted + IN_FLIGHT_WAIT.minus(SLACK).toNanos();
    TimeUnit.NANOSECONDS.sleep(Math.max(0, rollBackAt - System.nanoTime()));
    firstRollsBack.countDown();
    first.get(60, TimeUnit.SECONDS);

    Object gaveUp = null;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (gaveUp == null && System.nanoTime() < deadline) {
      for (Future<Object> repeat : repeats) {
        if (repeat.isDone() && repeat.get() instanceof Duration waited) {
          gaveUp = waited;
        }
      }
      TimeUnit.MILLISECONDS.sleep(20);
    }
    nextHolderMayEnd.countDown();
    for (Future<Object> repeat : repeats) {
      repeat.get(60, TimeUnit.SECONDS);
    }

    // failed before the fix: about 4 s + 6 s, a second full lock_timeout on the repeat that took
    // the key
    assertThat(gaveUp).as("the repeat that gave up").isInstanceOf(Duration.class);
    assertThat((Duration) gaveUp)
        .as("how long a repeat waited (and held its connection)")
        .isLessThanOrEqualTo(IN_FLIGHT_WAIT.plus(SLACK));
  }

  interface Hold {
    void run() throws Exception;
  }

  /**
   * A joined call whose sender holds the transaction open until {@code hold} returns; rolled back.
   */
  private Void inRolledBackTransaction(IdempotencyGuard guard, String key, Hold hold)
      throws Exception {
    try (Connection connection = pool.getConnection()) {
      connection.setAutoCommit(false);
      try {
        guard.executeInTransaction(
            store.joining(connection),
            key,
            TTL,
            ctx -> {
              hold.run();
              return "enqueued";
            });
      } finally {
        connection.rollback();
        connection.setAutoCommit(true);
      }
    }
    return null;
  }

  /** Polls PostgreSQL until {@code count} sessions wait on a lock. */
  private void awaitLockWaiters(int count) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      try (Connection connection = pool.getConnection();
          Statement statement = connection.createStatement();
          ResultSet waiting =
              statement.executeQuery("SELECT COUNT(*) FROM pg_locks WHERE NOT granted")) {
        waiting.next();
        if (waiting.getInt(1) >= count) {
          return;
        }
      }
      TimeUnit.MILLISECONDS.sleep(20);
    }
    throw new AssertionError("the repeats never waited on the first transaction's lock");
  }

  @Test
  void aUsualRepeatOfAKeyInAnOpenJoinedTransactionIsInProgressNotAStoreFailure() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder().store(store).inFlightWait(Duration.ofSeconds(1)).build();
    String key = "mixed:" + UUID.randomUUID();
    CountDownLatch joinedHolds = new CountDownLatch(1);
    CountDownLatch joinedMayEnd = new CountDownLatch(1);
    Future<?> joined =
        threads.submit(
            () ->
                inRolledBackTransaction(
                    guard,
                    key,
                    () -> {
                      joinedHolds.countDown();
                      joinedMayEnd.await(60, TimeUnit.SECONDS);
                    }));
    assertThat(joinedHolds.await(60, TimeUnit.SECONDS)).isTrue();

    Throwable repeat;
    try {
      guard.execute(key, TTL, ctx -> "sent in the usual mode");
      repeat = null;
    } catch (RuntimeException e) {
      repeat = e;
    } finally {
      joinedMayEnd.countDown();
    }
    joined.get(60, TimeUnit.SECONDS);

    // failed before the fix: KeyStoreException (SQLState 57014, the statement cancelled) after
    // about 5 s
    assertThat(repeat).isInstanceOf(IdempotencyInProgressException.class);
  }
}
