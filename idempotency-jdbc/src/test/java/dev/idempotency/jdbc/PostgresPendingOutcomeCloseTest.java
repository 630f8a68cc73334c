package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyEvent.Type;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.testservers.Poll;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Issue 37 (SPEC 1, 14) on a real PostgreSQL 17: a background outcome write is in the database when
 * {@code close()}'s grace passes, and fails there (the database closed to connections, the write's
 * own connection terminated). {@code close()} waits for that write instead of returning with it in
 * flight, and abandons it, with its {@link Type#OUTCOME_ABANDONED}, before it returns; not on the
 * writer's thread afterwards (the flake of {@code
 * PostgresOutcomeWriteRetryTest.closeReturnsWithinItsGraceAndAbandonsWhatTheDatabaseDidNotTake}).
 *
 * <p>The race is driven, not timed: the writer's connection holds the write at its first call,
 * ignoring interrupts, until {@code close()} has either returned or is waiting inside {@code
 * PendingOutcomes.close} (its thread parked there, seen in its stack); only then does the database
 * fail the write.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PostgresPendingOutcomeCloseTest {

  static final String DATABASE = "pending_outcome_close";
  static final Duration TTL = Duration.ofHours(1);
  static final Duration WAIT = Duration.ofSeconds(30);

  private HikariDataSource pool;
  private final AtomicBoolean holdWriter = new AtomicBoolean();
  private final CountDownLatch writerHeld = new CountDownLatch(1);
  private final CountDownLatch releaseWriter = new CountDownLatch(1);

  @BeforeAll
  void startPostgres() {
    pool = SharedPostgres.pool(DATABASE, 4);
  }

  @AfterAll
  void stopPostgres() {
    releaseWriter.countDown();
    SharedPostgres.allowConnections(DATABASE);
    if (pool != null) {
      pool.close();
    }
  }

  @Test
  void aWriteInTheDatabaseWhenTheGracePassesIsAbandonedBeforeCloseReturns() throws Exception {
    JdbcKeyStore store =
        JdbcKeyStore.builder(new HoldingWriter(pool))
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofMillis(500))
            .build();
    List<Type> events = new CopyOnWriteArrayList<>();
    MutableClock clock = new MutableClock(Instant.parse("2026-12-05T00:00:00Z"));
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .lease(Duration.ofSeconds(30))
            .completionAttempts(1)
            .closeGracePeriod(Duration.ofMillis(200))
            .listener(event -> events.add(event.type()))
            .build();
    String key = "close-in-flight:" + UUID.randomUUID();
    AtomicReference<List<Type>> whenCloseReturned = new AtomicReference<>();
    Thread closer =
        new Thread(
            () -> {
              guard.close();
              whenCloseReturned.set(List.copyOf(events));
            },
            "test-closer");
    try {
      String sent =
          guard.execute(
              key,
              TTL,
              ctx -> {
                SharedPostgres.refuseConnections(DATABASE); // the call's own writes fail
                return "sent";
              });
      holdWriter.set(true);
      SharedPostgres.allowConnections(DATABASE); // the next background round gets a connection
      assertThat(writerHeld.await(WAIT.toSeconds(), TimeUnit.SECONDS))
          .as("the background write in the database")
          .isTrue();

      closer.start();
      Poll.within(WAIT)
          .until(
              "close() to return or to wait for the write in progress",
              () -> !closer.isAlive() || waitingInPendingOutcomesClose(closer));
      SharedPostgres.refuseConnections(DATABASE); // terminates the held write's connection
      releaseWriter.countDown();
      closer.join(TimeUnit.SECONDS.toMillis(60));

      assertThat(closer.isAlive()).as("close() returned").isFalse();
      assertThat(sent).isEqualTo("sent");
      assertThat(whenCloseReturned.get())
          .as("events when close() returned")
          .containsOnlyOnce(Type.OUTCOME_ABANDONED)
          .doesNotContain(Type.OUTCOME_RECORDED_LATE);
      SharedPostgres.allowConnections(DATABASE);
      try (IdempotencyGuard reader = IdempotencyGuard.builder().store(store).clock(clock).build()) {
        RecordState state =
            Poll.within(WAIT)
                .ignoring(KeyStoreException.class)
                .until(
                    "the store to answer", () -> reader.find(key).orElseThrow().state(), s -> true);
        assertThat(state)
            .as("abandoned as a crash would leave it")
            .isEqualTo(RecordState.IN_PROGRESS);
      }
      assertThat(events).as("events in the end").containsOnlyOnce(Type.OUTCOME_ABANDONED);
    } finally {
      releaseWriter.countDown();
      SharedPostgres.allowConnections(DATABASE);
      closer.join(TimeUnit.SECONDS.toMillis(60));
    }
  }

  /** Whether {@code thread} is parked, with a timeout, inside {@code PendingOutcomes.close}. */
  private static boolean waitingInPendingOutcomesClose(Thread thread) {
    StackTraceElement[] stack = thread.getStackTrace();
    return thread.getState() == Thread.State.TIMED_WAITING
        && Arrays.stream(stack)
            .anyMatch(
                frame ->
                    frame.getClassName().equals("dev.idempotency.PendingOutcomes")
                        && frame.getMethodName().equals("close"));
  }

  /**
   * Connections whose first call on the guard's outcome writer thread, once armed, waits for the
   * test (ignoring interrupts, as a database call in progress would) before it goes to PostgreSQL.
   */
  private final class HoldingWriter extends ForwardingDataSource {

    HoldingWriter(HikariDataSource delegate) {
      super(delegate);
    }

    @Override
    Connection wrap(Connection connection) {
      return (Connection)
          Proxy.newProxyInstance(
              Connection.class.getClassLoader(),
              new Class<?>[] {Connection.class},
              (proxy, method, args) -> {
                if (Thread.currentThread().getName().contains("outcome-writer")
                    && holdWriter.compareAndSet(true, false)) {
                  holdUntilReleased();
                }
                try {
                  return method.invoke(connection, args);
                } catch (InvocationTargetException e) {
                  throw e.getCause();
                }
              });
    }

    private void holdUntilReleased() {
      writerHeld.countDown();
      boolean interrupted = false;
      try {
        while (true) {
          try {
            if (!releaseWriter.await(WAIT.toSeconds(), TimeUnit.SECONDS)) {
              throw new IllegalStateException("the test never released the write");
            }
            return;
          } catch (InterruptedException e) {
            interrupted = true;
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }
  }
}
