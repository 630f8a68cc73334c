package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.KeyStoreException;
import dev.idempotency.tck.MutableClock;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression test (issue 38, a door left open). Before the fix, a sender that commits the caller's
 * transaction itself (a helper that commits, a framework's nested commit) was accepted. The claim
 * commits as an in-progress record with a lease, together with the outbox row; the caller's later
 * rollback removes only the outcome. Once that lease has run out, the retry takes the key over and
 * enqueues a second row: a duplicate with no crash at all. {@code JoinedCall} means to catch this
 * ("was it rolled back or committed inside the sender?"), but the fenced outcome write still finds
 * its row after a commit, so the check never fired. Now the call fails, and the outcome is recorded
 * outside the transaction, so the retry replays it.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class JoinedSenderCommitsTest {

  private static final Duration TTL = Duration.ofHours(24);

  private HikariDataSource dataSource;
  private JdbcKeyStore store;

  @BeforeAll
  void start() throws SQLException {
    dataSource = Pools.of("jdbc:h2:mem:sendercommitsprobe;DB_CLOSE_DELAY=-1", 4);
    store =
        JdbcKeyStore.builder(dataSource)
            .tableName("idem_commit_probe")
            .createSchemaIfMissing(true)
            .connectionWait(Duration.ofSeconds(30))
            .build();
    try (Connection connection = dataSource.getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE TABLE outbox (id VARCHAR(64) PRIMARY KEY, idem_key VARCHAR(200))");
    }
  }

  @AfterAll
  void stop() {
    dataSource.close();
  }

  @Test
  void aSenderThatCommitsIsRefusedOrTheRetryDoesNotEnqueueTwice() throws Exception {
    MutableClock clock = new MutableClock(Instant.now());
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .clock(clock)
            .lease(Duration.ofSeconds(30))
            .inFlightWait(Duration.ofSeconds(1))
            .build();
    String key = "commits:" + UUID.randomUUID();

    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      try {
        guard.executeInTransaction(
            store.joining(connection),
            key,
            TTL,
            ctx -> {
              String id = enqueue(connection, key);
              connection.commit(); // the misuse
              return id;
            });
        throw new AssertionError("a sender that commits the transaction was accepted");
      } catch (KeyStoreException refused) {
        assertThat(refused).hasMessageContaining("the sender committed the caller's transaction");
      }
      connection.rollback(); // e.g. a later step of the caller failed
      connection.setAutoCommit(true);
    }
    clock.advance(Duration.ofMinutes(1)); // past the 30 s lease, well inside the window

    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      guard.executeInTransaction(
          store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
      connection.commit();
      connection.setAutoCommit(true);
    }

    // failed before the fix: 2 rows, the retry took the committed in-progress claim over and
    // enqueued again
    assertThat(rows(key)).as("outbox rows of one key, with no crash").isEqualTo(1);
  }

  private static String enqueue(Connection connection, String key) throws SQLException {
    String id = UUID.randomUUID().toString();
    try (PreparedStatement insert =
        connection.prepareStatement("INSERT INTO outbox (id, idem_key) VALUES (?, ?)")) {
      insert.setString(1, id);
      insert.setString(2, key);
      insert.executeUpdate();
    }
    return id;
  }

  private int rows(String key) throws SQLException {
    try (Connection connection = dataSource.getConnection();
        PreparedStatement count =
            connection.prepareStatement("SELECT COUNT(*) FROM outbox WHERE idem_key = ?")) {
      count.setString(1, key);
      try (ResultSet result = count.executeQuery()) {
        result.next();
        return result.getInt(1);
      }
    }
  }
}
