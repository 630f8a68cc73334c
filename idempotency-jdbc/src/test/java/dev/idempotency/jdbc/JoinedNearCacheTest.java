package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.NearCache;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Regression test (issue 38). Before the fix, a second guarded call on the same key inside one
 * joined transaction replayed the first call's uncommitted record, and the near cache kept that
 * replay. After the transaction rolled back, the retry was answered from the cache with the id of
 * an outbox row that never committed: the caller was told "done" and nothing was enqueued. Joined
 * calls now neither read nor fill the near cache.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class JoinedNearCacheTest {

  private static final Duration TTL = Duration.ofHours(24);

  private HikariDataSource dataSource;
  private JdbcKeyStore store;

  @BeforeAll
  void start() throws SQLException {
    dataSource = Pools.of("jdbc:h2:mem:nearcacheprobe;DB_CLOSE_DELAY=-1", 4);
    store =
        JdbcKeyStore.builder(dataSource)
            .tableName("idem_near_probe")
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
  void aRetryAfterARolledBackTransactionEnqueuesAgain() throws Exception {
    IdempotencyGuard guard =
        IdempotencyGuard.builder()
            .store(store)
            .nearCache(NearCache.of(1_000, Duration.ofMinutes(5)))
            .build();
    String key = "near:" + UUID.randomUUID();

    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      guard.executeInTransaction(
          store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
      // the same request again, in the same transaction (a retry loop, a second code path)
      guard.executeInTransaction(
          store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
      connection.rollback();
      connection.setAutoCommit(true);
    }
    assertThat(rows(key)).isZero();

    String retried;
    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      retried =
          guard.executeInTransaction(
              store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
      connection.commit();
      connection.setAutoCommit(true);
    }

    // failed before the fix: the retry replays the rolled-back id from the near cache; no row, no
    // record
    assertThat(rows(key)).as("outbox rows after the retry committed").isEqualTo(1);
    assertThat(guard.find(key)).as("the retry's committed record").isPresent();
    assertThat(retried).isEqualTo(idOf(key));
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

  private String idOf(String key) throws SQLException {
    try (Connection connection = dataSource.getConnection();
        PreparedStatement select =
            connection.prepareStatement("SELECT id FROM outbox WHERE idem_key = ?")) {
      select.setString(1, key);
      try (ResultSet result = select.executeQuery()) {
        return result.next() ? result.getString(1) : null;
      }
    }
  }
}
