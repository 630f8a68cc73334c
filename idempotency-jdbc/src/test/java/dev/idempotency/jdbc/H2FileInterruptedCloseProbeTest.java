package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.tck.ForwardingKeyStore;
import dev.idempotency.testservers.Poll;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.h2.jdbcx.JdbcDataSource;
import org.junit.jupiter.api.Test;

/**
 * probeB, suspicion 5: {@code UnsentClaims.close()} (the guard's close) stops the claim-taker
 * thread with {@code shutdownNow}, which interrupts it while a take-back is inside H2, on a FILE
 * database (H2's file channel closes on an interrupt during I/O), and the thread that calls {@code
 * close()} is itself interrupted. The claim's answer was lost (applied, then a {@code
 * KeyStoreException}), so the guard takes it back in the background; another connection of the
 * application holds the row's lock, so the take-back waits inside H2 when the guard closes.
 *
 * <p>Checked: the application's other connection still works, a new connection and a new store on
 * the same file work, the file reopens after every connection closed (not corrupt), and what the
 * key is left as. Observed on probeB (1157db4): passes. The interrupted take-back ends with a
 * failure (H2: HYT00, lock wait ended by the interrupt), H2 stays open and the file reopens intact;
 * the key is left IN_PROGRESS under the lost claim's token, so the next caller gets {@code
 * IdempotencyInProgressException} until the lease ends, as documented ("close() [...] drops what is
 * left, with one WARN [...]: such a key is then held for one lease, as after a crash"). The second
 * test interrupts the take-back's thread as it enters H2 (no lock to wait for): the take-back
 * succeeds (true), and the file stays usable. Regular tests, about 3 s.
 */
class H2FileInterruptedCloseProbeTest {

  static final Duration TTL = Duration.ofHours(1);
  static final Duration LEASE = Duration.ofSeconds(30);
  static final String TABLE = "interrupted_close_probe";

  @Test
  void aTakeBackInterruptedByCloseLeavesTheH2FileUsable() throws Exception {
    Path dir = Files.createTempDirectory("h2-interrupted-close");
    String url = "jdbc:h2:file:" + dir.resolve("db").toAbsolutePath() + ";LOCK_TIMEOUT=20000";
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL(url);
    Connection application = h2.getConnection(); // the application's own work on the database
    JdbcKeyStore jdbc =
        JdbcKeyStore.builder(h2).tableName(TABLE).createSchemaIfMissing(true).build();
    CountDownLatch takingBack = new CountDownLatch(1);
    CountDownLatch tookBack = new CountDownLatch(1);
    AtomicReference<Object> takeBackResult = new AtomicReference<>();
    AtomicInteger sends = new AtomicInteger();
    ForwardingKeyStore lostAnswer =
        new ForwardingKeyStore(jdbc) {
          @Override
          public ClaimResult claim(ClaimRequest request) {
            delegate.claim(request); // committed; its answer lost on the way back
            lockAllRows(application);
            throw new KeyStoreException("the claim's answer was lost", null);
          }

          @Override
          public boolean takeBack(String keyId, String ownerToken, Instant now) {
            takingBack.countDown();
            try {
              boolean taken = delegate.takeBack(keyId, ownerToken, now);
              takeBackResult.compareAndSet(null, taken);
              return taken;
            } catch (RuntimeException e) {
              takeBackResult.compareAndSet(null, e);
              throw e;
            } finally {
              tookBack.countDown();
            }
          }
        };
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(lostAnswer)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .build();
    String key = "interrupted-close:" + UUID.randomUUID();
    try {
      assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
      assertThat(takingBack.await(30, TimeUnit.SECONDS)).as("the take-back began").isTrue();
      Poll.within(Duration.ofSeconds(30))
          .every(Duration.ofMillis(20))
          .until("the take-back waits for the row lock inside H2", () -> blockedSessions(h2) > 0);

      Thread closer =
          new Thread(
              () -> {
                Thread.currentThread().interrupt();
                guard.close();
              },
              "interrupted-closer");
      closer.start();
      closer.join(TimeUnit.SECONDS.toMillis(60));
      assertThat(closer.isAlive()).as("close() returned").isFalse();
      boolean ended = tookBack.await(30, TimeUnit.SECONDS);

      application.rollback(); // the application lets go of its lock
      String what = "the take-back ended: " + ended + ", with " + takeBackResult.get();
      assertThat(count(application)).as("the application's connection works (%s)", what).isOne();
      try (Connection fresh = h2.getConnection()) {
        assertThat(count(fresh)).as("a new connection works (%s)", what).isOne();
      }
      try (IdempotencyGuard next =
          IdempotencyGuard.builder().store(jdbc).lease(LEASE).inFlightWait(Duration.ZERO).build()) {
        Object repeat;
        try {
          repeat = next.execute(key, TTL, ctx -> "sent-" + sends.incrementAndGet());
        } catch (IdempotencyInProgressException inProgress) {
          repeat = "in progress";
        }
        System.out.println("probeB H2 interrupted close: " + what + "; the repeat: " + repeat);
      }
    } finally {
      application.close();
    }
    JdbcDataSource reopened = new JdbcDataSource(); // every connection closed: the file is closed
    reopened.setURL(url);
    try (Connection again = reopened.getConnection()) {
      assertThat(count(again)).as("the reopened file holds the row").isOne();
    }
  }

  /**
   * The same interrupt, landing as the take-back enters H2 with no lock to wait for (shutdownNow's
   * interrupt can arrive at any point of the statement, its file I/O included): the claim-taker's
   * thread is interrupted just before the store's take-back runs. Checked as above.
   */
  @Test
  void aTakeBackInterruptedAsItEntersH2LeavesTheFileUsable() throws Exception {
    Path dir = Files.createTempDirectory("h2-interrupted-io");
    String url = "jdbc:h2:file:" + dir.resolve("db").toAbsolutePath();
    JdbcDataSource h2 = new JdbcDataSource();
    h2.setURL(url);
    Connection application = h2.getConnection();
    JdbcKeyStore jdbc =
        JdbcKeyStore.builder(h2).tableName(TABLE).createSchemaIfMissing(true).build();
    CountDownLatch tookBack = new CountDownLatch(1);
    AtomicReference<Object> takeBackResult = new AtomicReference<>();
    ForwardingKeyStore lostAnswer =
        new ForwardingKeyStore(jdbc) {
          @Override
          public ClaimResult claim(ClaimRequest request) {
            delegate.claim(request); // committed; its answer lost on the way back
            throw new KeyStoreException("the claim's answer was lost", null);
          }

          @Override
          public boolean takeBack(String keyId, String ownerToken, Instant now) {
            Thread.currentThread().interrupt(); // shutdownNow's interrupt, as the take-back runs
            try {
              boolean taken = delegate.takeBack(keyId, ownerToken, now);
              takeBackResult.compareAndSet(null, taken);
              return taken;
            } catch (RuntimeException e) {
              takeBackResult.compareAndSet(null, e);
              throw e;
            } finally {
              Thread.interrupted();
              tookBack.countDown();
            }
          }
        };
    String key = "interrupted-io:" + UUID.randomUUID();
    try (IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(lostAnswer)
            .lease(LEASE)
            .inFlightWait(Duration.ZERO)
            .build()) {
      assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "sent"))
          .isInstanceOf(KeyStoreException.class);
      assertThat(tookBack.await(30, TimeUnit.SECONDS)).as("the take-back ran").isTrue();
      String what = "the take-back ended with " + takeBackResult.get();
      System.out.println("probeB H2 interrupted I/O: " + what);
      assertThat(count(application))
          .as("the application's connection works (%s)", what)
          .isBetween(0, 1);
      try (Connection fresh = h2.getConnection()) {
        assertThat(count(fresh)).as("a new connection works (%s)", what).isBetween(0, 1);
      }
    } finally {
      application.close();
    }
    JdbcDataSource reopened = new JdbcDataSource();
    reopened.setURL(url);
    try (Connection again = reopened.getConnection()) {
      assertThat(count(again)).as("the reopened file can be read").isBetween(0, 1);
    }
  }

  private static void lockAllRows(Connection application) {
    try {
      application.setAutoCommit(false);
      try (Statement statement = application.createStatement();
          ResultSet rows = statement.executeQuery("SELECT * FROM " + TABLE + " FOR UPDATE")) {
        while (rows.next()) {
          // locked
        }
      }
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  private static int blockedSessions(JdbcDataSource h2) throws java.sql.SQLException {
    try (Connection look = h2.getConnection();
        Statement statement = look.createStatement();
        ResultSet rows =
            statement.executeQuery(
                "SELECT COUNT(*) FROM INFORMATION_SCHEMA.SESSIONS WHERE BLOCKER_ID IS NOT NULL")) {
      rows.next();
      return rows.getInt(1);
    }
  }

  private static int count(Connection connection) throws java.sql.SQLException {
    try (Statement statement = connection.createStatement();
        ResultSet rows = statement.executeQuery("SELECT COUNT(*) FROM " + TABLE)) {
      rows.next();
      return rows.getInt(1);
    }
  }
}
