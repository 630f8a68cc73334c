package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.tck.StoreRecovery;
import dev.idempotency.testservers.FreePorts;
import dev.idempotency.testservers.Poll;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;

/**
 * SPEC section 14 on the JDBC store: a service whose database is down when it starts still builds
 * its store, fails each call closed within the connection wait, and works once the database is up,
 * without a restart; the table is checked; and a call never waits for a pooled connection longer
 * than the store's bound, whatever the pool's own timeout.
 */
class JdbcStoreAvailabilityTest {

  static final Duration TTL = Duration.ofHours(1);

  @Test
  void aStoreBuiltWhilePostgresIsDownFailsClosedThenWorksOnceItIsUp() throws Exception {
    int port = FreePorts.next();
    try (HikariDataSource dataSource =
        Pools.of(
            "jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=postgres&connectTimeout=2",
            4)) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(dataSource)
              .tableName("idem_started_down")
              .createSchemaIfMissing(true)
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();

      long start = System.nanoTime();
      assertThatThrownBy(() -> guard.execute("down:" + UUID.randomUUID(), TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
      long failedAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertThatThrownBy(store::tableExists).isInstanceOf(KeyStoreException.class);

      try (EmbeddedPostgres postgres =
          EmbeddedPostgres.builder()
              .setPort(port)
              .setPGStartupWait(Duration.ofSeconds(120))
              .start()) {
        String key = "up:" + UUID.randomUUID();
        String sent =
            StoreRecovery.sendOnceTheStoreAnswers(guard, key, TTL, Duration.ofSeconds(60));

        assertThat(failedAfterMillis)
            .as("failed within the connection wait, not Hikari's 30 s")
            .isLessThan(10_000);
        assertThat(sent).isEqualTo("sent");
        assertThat(guard.execute(key, TTL, ctx -> "again")).isEqualTo("sent");
        assertThat(store.tableExists()).isTrue();
        assertThat(store.dialect()).isEqualTo(JdbcDialect.POSTGRESQL);
      }
    }
  }

  @Test
  void tableExistsSaysWhetherTheTableIsThere() {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:table-check-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");

    assertThat(JdbcKeyStore.builder(h2).tableName("idem_never_created").build().tableExists())
        .isFalse();
    assertThat(
            JdbcKeyStore.builder(h2)
                .tableName("idem_created")
                .createSchemaIfMissing(true)
                .build()
                .tableExists())
        .isTrue();
  }

  /**
   * Every connection of the pool is taken (by the application, or by calls stuck on a slow
   * database): a call fails after the store's connection wait, not after HikariCP's 30 s.
   */
  @Test
  void aCallWaitsForAPooledConnectionNoLongerThanTheStoresBound() throws Exception {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:pool-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
    HikariConfig config = new HikariConfig();
    config.setDataSource(h2);
    config.setMaximumPoolSize(1);
    config.setConnectionTimeout(30_000);
    try (HikariDataSource dataSource = new HikariDataSource(config)) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(dataSource)
              .createSchemaIfMissing(true)
              .connectionWait(Duration.ofMillis(300))
              .build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
      guard.execute("warm:" + UUID.randomUUID(), TTL, ctx -> "sent");

      try (Connection taken = dataSource.getConnection()) {
        long start = System.nanoTime();
        assertThatThrownBy(() -> guard.execute("busy:" + UUID.randomUUID(), TTL, ctx -> "sent"))
            .isInstanceOf(KeyStoreException.class);
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertThat(taken.isValid(1)).isTrue();
        assertThat(waited).isBetween(250L, 10_000L);
        assertThat(Thread.currentThread().isInterrupted())
            .as("the interrupt that ended the wait is cleared")
            .isFalse();
      }
      // the failure opened the guard's breaker: calls are refused until its probe sees the pool
      await(() -> sendsOnceTheStoreAnswers(guard), "the guard to use the pool again");
    }
  }

  private static boolean sendsOnceTheStoreAnswers(IdempotencyGuard guard) {
    try {
      return guard.execute("after:" + UUID.randomUUID(), TTL, ctx -> "sent").equals("sent");
    } catch (KeyStoreException refusedWhileProbing) {
      return false;
    }
  }

  /**
   * SPEC 16: the store never interrupts an application thread to bound its wait for a connection;
   * it stops waiting instead. A pool that does not answer interrupts (a driver in a TCP connect, a
   * pool that ignores them) is left waiting on a thread of the store's, the caller fails after the
   * connection wait with nothing sent, and the connection that arrives late goes back to the pool.
   */
  @Test
  @org.junit.jupiter.api.Timeout(
      value = 60,
      threadMode = org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD)
  void aWaitForAConnectionEndsWithoutInterruptingTheCallerAndTheLateConnectionIsReturned()
      throws Exception {
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL("jdbc:h2:mem:handoff-" + UUID.randomUUID() + ";DB_CLOSE_DELAY=-1");
    StallingDataSource stalling = new StallingDataSource(h2);
    JdbcKeyStore store =
        JdbcKeyStore.builder(stalling)
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofMillis(300))
            .build();
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();
    guard.execute("warm:" + UUID.randomUUID(), TTL, ctx -> "sent");
    java.util.concurrent.atomic.AtomicInteger sends =
        new java.util.concurrent.atomic.AtomicInteger();

    stalling.stall.set(true);
    long start = System.nanoTime();
    assertThatThrownBy(
            () ->
                guard.execute(
                    "stalled:" + UUID.randomUUID(), TTL, ctx -> "sent-" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("300 ms");
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    stalling.stall.set(false);
    stalling.release.countDown();

    assertThat(waited).as("the caller's wait, against the pool's unbounded one").isLessThan(10_000);
    assertThat(sends).hasValue(0);
    assertThat(Thread.currentThread().isInterrupted()).isFalse();
    // the caller's late connection, and the breaker's probe's if it asked while the pool stalled
    await(
        () ->
            stalling.lateConnections.get() >= 1
                && stalling.lateConnectionsClosed.get() == stalling.lateConnections.get(),
        "every late connection to go back");
    assertThat(stalling.waitersInterrupted)
        .as("threads that were interrupted while they waited for the pool")
        .hasValue(0);
    assertThat(stalling.callerThreadsThatWaited)
        .as("application threads left waiting inside the pool")
        .hasValue(0);
  }

  /**
   * SPEC 16: an error names its real cause, not the mechanism that stopped waiting. HikariCP, with
   * its default 30 s connection timeout, in front of a PostgreSQL port where nothing listens: the
   * call fails within the store's connection wait and says the connection was refused, not that a
   * wait was interrupted.
   */
  @Test
  void aPoolThatCannotConnectFailsWithinTheWaitNamingTheRealCause() throws Exception {
    int port = FreePorts.next();
    try (HikariDataSource dataSource =
        Pools.of("jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=postgres", 2)) {
      JdbcKeyStore store =
          JdbcKeyStore.builder(dataSource).connectionWait(Duration.ofMillis(500)).build();
      IdempotencyGuard guard = IdempotencyGuard.builder().store(store).build();

      long start = System.nanoTime();
      Throwable failure =
          org.assertj.core.api.Assertions.catchThrowable(
              () -> guard.execute("refused:" + UUID.randomUUID(), TTL, ctx -> "sent"));
      long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

      assertThat(failure).isInstanceOf(KeyStoreException.class);
      StringBuilder chain = new StringBuilder();
      for (Throwable t = failure; t != null; t = t.getCause()) {
        chain.append(t.getClass().getName()).append(": ").append(t.getMessage()).append('\n');
      }
      assertThat(chain.toString()).containsIgnoringCase("refused").doesNotContain("Interrupted");
      assertThat(waited).isLessThan(10_000);
      assertThat(Thread.currentThread().isInterrupted()).isFalse();
    }
  }

  static void await(java.util.function.BooleanSupplier condition, String what)
      throws InterruptedException {
    Poll.within(Duration.ofSeconds(30))
        .every(Duration.ofMillis(5))
        .until(what, condition::getAsBoolean);
  }

  /** A DataSource whose getConnection, while stalled, waits for a latch and ignores interrupts. */
  static final class StallingDataSource extends ForwardingDataSource {
    final java.util.concurrent.atomic.AtomicBoolean stall =
        new java.util.concurrent.atomic.AtomicBoolean();
    final java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    final java.util.concurrent.atomic.AtomicInteger waitersInterrupted =
        new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicInteger callerThreadsThatWaited =
        new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicInteger lateConnectionsClosed =
        new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicInteger lateConnections =
        new java.util.concurrent.atomic.AtomicInteger();
    final Thread testThread = Thread.currentThread();

    StallingDataSource(javax.sql.DataSource delegate) {
      super(delegate);
    }

    @Override
    public Connection getConnection() throws java.sql.SQLException {
      if (!stall.get()) {
        return delegate.getConnection();
      }
      if (Thread.currentThread() == testThread) {
        callerThreadsThatWaited.incrementAndGet();
      }
      boolean interrupted = false;
      while (true) {
        try {
          release.await();
          break;
        } catch (InterruptedException e) {
          interrupted = true; // a pool that ignores interrupts
        }
      }
      if (interrupted || Thread.interrupted()) {
        waitersInterrupted.incrementAndGet();
      }
      Connection late = delegate.getConnection();
      lateConnections.incrementAndGet();
      return (Connection)
          java.lang.reflect.Proxy.newProxyInstance(
              Connection.class.getClassLoader(),
              new Class<?>[] {Connection.class},
              (proxy, method, args) -> {
                if (method.getName().equals("close")) {
                  lateConnectionsClosed.incrementAndGet();
                }
                try {
                  return method.invoke(late, args);
                } catch (java.lang.reflect.InvocationTargetException e) {
                  throw e.getCause();
                }
              });
    }

    @Override
    Connection wrap(Connection connection) {
      return connection;
    }
  }
}
