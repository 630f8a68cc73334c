package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyKey;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.OperationDeadlines;
import dev.idempotency.spi.RecordState;
import dev.idempotency.tck.GuardOnStoreContract;
import dev.idempotency.tck.KeyStoreFactory;
import dev.idempotency.tck.MutableClock;
import dev.idempotency.tck.SharedKeyStoreContract;
import dev.idempotency.testservers.Poll;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.ResultSet;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jdbi.v3.core.Jdbi;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The store contract plus what is particular to SQL: schema, database time, purge, connection use,
 * statement counts and errors. One subclass per database starts the real server.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class JdbcKeyStoreContract extends SharedKeyStoreContract {

  static final String TABLE = "idem_contract";
  static final Duration TTL = Duration.ofHours(24);

  private JdbcKeyStore store;
  private final AtomicInteger tableCounter = new AtomicInteger();

  /** The database, started by the subclass. */
  abstract DataSource dataSource();

  /** A JDBC URL with credentials, for the second JVM. */
  abstract String jdbcUrl();

  /** The dialect the store must detect. */
  abstract JdbcDialect expectedDialect();

  @Override
  protected synchronized KeyStore store() {
    if (store == null) {
      store =
          JdbcKeyStore.builder(dataSource()).tableName(TABLE).createSchemaIfMissing(true).build();
    }
    return store;
  }

  /** The guard's promises on this store. */
  @Nested
  class OnTheGuard extends GuardOnStoreContract {
    @Override
    protected KeyStore store() {
      return JdbcKeyStoreContract.this.store();
    }
  }

  /**
   * probeL: the take-back raced by renewals, completions and third callers' claims, each on its own
   * pooled connection, on this database.
   */
  @Nested
  class TakeBackRaces extends dev.idempotency.tck.TakeBackRaceProbe {
    @Override
    protected KeyStore store() {
      return JdbcKeyStoreContract.this.store();
    }
  }

  /** Guarded calls inside the caller's transaction, on this database. */
  @Nested
  class InTheCallersTransaction extends JoinedTransactionCases {
    @Override
    DataSource dataSource() {
      return JdbcKeyStoreContract.this.dataSource();
    }

    @Override
    String recordTable() {
      return TABLE;
    }

    @Override
    String jdbcUrl() {
      return JdbcKeyStoreContract.this.jdbcUrl();
    }
  }

  @Override
  protected Class<? extends KeyStoreFactory> factoryClass() {
    return JdbcStoreFactory.class;
  }

  /** The table is created first: the second JVM's store does not create it. */
  @Override
  protected String factoryConfig() {
    assertThat(((JdbcKeyStore) store()).tableExists()).isTrue();
    return jdbcUrl() + "|" + TABLE;
  }

  String freshTable() {
    return "idem_t" + tableCounter.incrementAndGet() + "_" + System.nanoTime() % 100_000;
  }

  JdbcKeyStore.Builder freshStore() {
    return JdbcKeyStore.builder(dataSource()).tableName(freshTable()).createSchemaIfMissing(true);
  }

  /**
   * A store built on a Jdbi borrows its connections through a handle where one built on a
   * DataSource borrows them from the pool; the single-key operations answer the same on both.
   */
  @Test
  void aStoreBuiltOnAJdbiClaimsExtendsCompletesAndReleasesAsOneBuiltOnItsDataSource() {
    JdbcKeyStore onJdbi =
        JdbcKeyStore.builder(Jdbi.create(dataSource()))
            .tableName(freshTable())
            .createSchemaIfMissing(true)
            .build();
    String completed = newKeyId();
    String released = newKeyId();
    String token = newToken();
    String otherToken = newToken();

    assertThat(onJdbi.claim(claim(completed, token))).isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(
            onJdbi.extend(new dev.idempotency.spi.ExtendRequest(completed, token, LONG_LEASE, T0)))
        .isTrue();
    assertThat(onJdbi.complete(complete(completed, otherToken, bytes("other")))).isFalse();
    assertThat(onJdbi.complete(complete(completed, token, bytes("n_1")))).isTrue();
    ClaimResult replay = onJdbi.claim(claim(completed, newToken()));
    assertThat(onJdbi.claim(claim(released, token))).isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(onJdbi.release(released, token)).isTrue();

    assertThat(replay).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) replay).record().payload()).isEqualTo(bytes("n_1"));
    assertThat(onJdbi.claim(claim(released, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  void aSchemaQualifiedTableIsCreatedAndUsedWithItsIndexInThatSchema() {
    String name = freshTable();
    Jdbi.create(dataSource())
        .useHandle(handle -> handle.execute("CREATE SCHEMA IF NOT EXISTS idem_qualified"));
    JdbcKeyStore qualified =
        JdbcKeyStore.builder(dataSource())
            .tableName("idem_qualified." + name)
            .createSchemaIfMissing(true)
            .build();

    String keyId = newKeyId();
    assertThat(qualified.claim(claim(keyId, newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(countRows("idem_qualified." + name)).isEqualTo(1);
    assertThat(JdbcKeyStore.schemaSql(expectedDialect(), "idem_qualified." + name))
        .contains("idem_qualified." + name + " (")
        .contains(name + "_retain_idx")
        .doesNotContain("idem_qualified." + name + "_retain_idx")
        .doesNotContain("${");
  }

  @Test
  void dialectIsDetectedFromTheConnection() {
    assertThat(((JdbcKeyStore) store()).dialect()).isEqualTo(expectedDialect());
  }

  @Test
  void shippedDdlRunByHandCreatesTheSameSchemaAsTheStore() throws Exception {
    String template;
    try (InputStream in =
        getClass().getClassLoader().getResourceAsStream(expectedDialect().schemaResource())) {
      template = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    // what Flyway or Liquibase does with the shipped template and two placeholder values
    String script =
        template
            .replace("${table}", JdbcKeyStore.DEFAULT_TABLE_NAME)
            .replace("${name}", JdbcKeyStore.DEFAULT_TABLE_NAME);
    assertThat(script).doesNotContain("${");
    assertThat(JdbcKeyStore.schemaSql(expectedDialect(), JdbcKeyStore.DEFAULT_TABLE_NAME))
        .isEqualTo(script);
    Jdbi.create(dataSource()).useHandle(handle -> handle.createScript(script).execute());
    String storeTable = freshTable();
    // the store creates its table once the database first answers: here, at the check
    assertThat(
            JdbcKeyStore.builder(dataSource())
                .tableName(storeTable)
                .createSchemaIfMissing(true)
                .build()
                .tableExists())
        .isTrue();

    List<String> byHand = columns(JdbcKeyStore.DEFAULT_TABLE_NAME);
    List<String> byStore = columns(storeTable);

    assertThat(byHand).hasSize(11).isEqualTo(byStore);
    JdbcKeyStore onHandMadeTable = JdbcKeyStore.builder(dataSource()).build();
    assertThat(onHandMadeTable.claim(claim(newKeyId(), newToken())))
        .isEqualTo(new ClaimResult.Claimed(1, false));
  }

  @Test
  void creatingTheSchemaTwiceIsHarmless() {
    String table = freshTable();
    JdbcKeyStore.builder(dataSource()).tableName(table).createSchemaIfMissing(true).build();
    JdbcKeyStore again =
        JdbcKeyStore.builder(dataSource()).tableName(table).createSchemaIfMissing(true).build();

    assertThat(again.claim(claim(newKeyId(), newToken()))).isInstanceOf(ClaimResult.Claimed.class);
  }

  private List<String> columns(String table) throws Exception {
    List<String> columns = new ArrayList<>();
    try (Connection connection = dataSource().getConnection()) {
      DatabaseMetaData meta = connection.getMetaData();
      for (String name : List.of(table, table.toUpperCase(Locale.ROOT))) {
        try (ResultSet rs = meta.getColumns(connection.getCatalog(), null, name, null)) {
          while (rs.next()) {
            columns.add(
                rs.getString("COLUMN_NAME").toLowerCase(Locale.ROOT)
                    + " "
                    + rs.getString("TYPE_NAME").toLowerCase(Locale.ROOT)
                    + " nullable="
                    + rs.getString("IS_NULLABLE"));
          }
        }
        if (!columns.isEmpty()) {
          break;
        }
      }
    }
    return columns;
  }

  @Test
  void tableNameThatIsNotAPlainIdentifierIsRefusedAtBuildTime() {
    for (String bad :
        List.of(
            "records; DROP TABLE users",
            "records--",
            "a.b.c",
            "1records",
            "rec ords",
            "\"records\"",
            "",
            "x".repeat(64))) {
      assertThatThrownBy(() -> JdbcKeyStore.builder(dataSource()).tableName(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("tableName must be a plain identifier");
    }
    assertThatThrownBy(() -> JdbcKeyStore.builder(dataSource()).tableName(null))
        .isInstanceOf(NullPointerException.class);
  }

  @Test
  void otpWalkthroughThroughTheGuardSendsOnce() {
    IdempotencyGuard guard = IdempotencyGuard.builder().store(store()).build();
    String key = IdempotencyKey.of("otp", "user_42", "challenge_" + newKeyId());
    AtomicInteger sms = new AtomicInteger();

    String first = guard.execute(key, TTL, ctx -> "n_" + (800 + sms.incrementAndGet()));
    String retry = guard.execute(key, TTL, ctx -> "n_" + (800 + sms.incrementAndGet()));

    assertThat(first).isEqualTo("n_801");
    assertThat(retry).isEqualTo("n_801");
    assertThat(sms).hasValue(1);
  }

  /** A store on the test table whose every statement is counted, at the JDBC level. */
  /** A store whose statements are counted, prepared (its schema created) before counting. */
  JdbcKeyStore countingStore(AtomicInteger statements) {
    JdbcKeyStore store =
        JdbcKeyStore.builder(new StatementCounter(dataSource(), statements))
            .dialect(expectedDialect())
            .tableName(TABLE)
            .createSchemaIfMissing(true)
            .build();
    assertThat(store.tableExists()).isTrue();
    return store;
  }

  @Test
  void firstSendCostsTwoStatementsAndAReplayAtMostTwo() {
    AtomicInteger statements = new AtomicInteger();
    JdbcKeyStore countedStore = countingStore(statements);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(countedStore).build();
    String key = "count:" + newKeyId();
    statements.set(0);

    guard.execute(key, TTL, ctx -> "n_1");
    int firstSend = statements.getAndSet(0);
    guard.execute(key, TTL, ctx -> "n_2");
    int replay = statements.get();

    System.out.printf(
        "%s statements: first send %d, replay %d%n", expectedDialect(), firstSend, replay);
    // a claim and a completion, each with H2's read of its lock wait (LockWaitBound)
    assertThat(firstSend).isEqualTo(2 + 2 * lockWaitReads());
    // PostgreSQL inserts-or-selects in one statement; the others need the select after it
    assertThat(replay).isEqualTo(expectedReplayStatements() + lockWaitReads());
  }

  @Test
  void aNewBatchCostsOneStatementOnPostgresqlAndAReplayedOneTwo() {
    AtomicInteger statements = new AtomicInteger();
    JdbcKeyStore countedStore = countingStore(statements);
    List<ClaimRequest> batch = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      batch.add(claim("batch-count:" + newKeyId(), newToken()));
    }
    List<ClaimRequest> replay = new ArrayList<>();
    for (ClaimRequest request : batch) {
      replay.add(claim(request.keyId(), newToken()));
    }
    statements.set(0);

    List<ClaimResult> first = countedStore.claimAll(batch);
    int firstStatements = statements.getAndSet(0);
    List<ClaimResult> again = countedStore.claimAll(replay);
    int replayStatements = statements.get();

    System.out.printf(
        "%s batch of 300: %d statements new, %d replayed%n",
        expectedDialect(), firstStatements, replayStatements);
    assertThat(first).hasSize(300).allMatch(r -> r instanceof ClaimResult.Claimed);
    assertThat(again).hasSize(300).allMatch(r -> r instanceof ClaimResult.Existing);
    switch (expectedDialect()) {
      case POSTGRESQL -> {
        assertThat(firstStatements).as("insert, reporting what it inserted").isEqualTo(1);
        assertThat(replayStatements).as("insert nothing, select what it did not").isEqualTo(2);
      }
      case MYSQL -> {
        assertThat(firstStatements).as("select, insert the absent, select them").isEqualTo(3);
        assertThat(replayStatements).as("one select").isEqualTo(1);
      }
      // in-process: key by key, the single-key statements
      case H2 ->
          assertThat(replayStatements)
              .isEqualTo((expectedReplayStatements() + lockWaitReads()) * 300);
    }
  }

  /**
   * One batch holding every case a claim tells apart decides each key as a claim of that key alone
   * would: a new key claimed; a live lease and a settled record returned; an expired lease taken
   * over with the next attempt when the fingerprint matches, returned when it does not; a record
   * past its window claimed afresh; and a key twice in the batch claimed by its first request only.
   * On PostgreSQL the new keys cost one statement and the others one select, besides the takeover
   * and the reclaim.
   */
  @Test
  void aBatchDecidesEachKeyAsAClaimOfThatKeyAloneWould() {
    String inFlight = newKeyId();
    String completed = newKeyId();
    String expired = newKeyId();
    String expiredOtherRequest = newKeyId();
    String pastWindow = newKeyId();
    String completedToken = newToken();
    Duration shortLease = Duration.ofMinutes(1);
    store().claim(claim(inFlight, newToken()));
    store().claim(claim(completed, completedToken));
    store().complete(complete(completed, completedToken, bytes("n_1")));
    store()
        .claim(
            new ClaimRequest(
                expired, newToken(), "fp-a", T0, shortLease, LONG_RETENTION, true, null));
    store()
        .claim(
            new ClaimRequest(
                expiredOtherRequest,
                newToken(),
                "fp-a",
                T0,
                shortLease,
                LONG_RETENTION,
                true,
                null));
    store().claim(claim(pastWindow, newToken(), Duration.ofSeconds(30), shortLease));
    String fresh = newKeyId();
    String twice = newKeyId();
    Instant later = T0.plus(Duration.ofMinutes(2));
    List<ClaimRequest> batch = new ArrayList<>();
    for (String keyId : List.of(fresh, twice, twice, inFlight, completed, pastWindow)) {
      batch.add(claim(keyId, newToken()).withNow(later));
    }
    batch.add(
        new ClaimRequest(
            expired, newToken(), "fp-a", later, LONG_LEASE, LONG_RETENTION, true, null));
    batch.add(
        new ClaimRequest(
            expiredOtherRequest,
            newToken(),
            "fp-b",
            later,
            LONG_LEASE,
            LONG_RETENTION,
            true,
            null));
    AtomicInteger statements = new AtomicInteger();
    JdbcKeyStore countedStore = countingStore(statements);
    statements.set(0);

    List<ClaimResult> results = countedStore.claimAll(batch);

    assertThat(results.get(0)).as("new").isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(results.get(1)).as("new, first of two").isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(existing(results.get(2)).state())
        .as("second of two")
        .isEqualTo(RecordState.IN_PROGRESS);
    assertThat(results.get(3)).as("live lease").isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) results.get(3)).leaseExpired()).isFalse();
    assertThat(existing(results.get(4)).payload()).as("settled").isEqualTo(bytes("n_1"));
    assertThat(results.get(5)).as("past its window").isEqualTo(new ClaimResult.Claimed(1, false));
    assertThat(results.get(6)).as("expired lease").isEqualTo(new ClaimResult.Claimed(2, true));
    assertThat(results.get(7))
        .as("expired lease, other request")
        .isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) results.get(7)).leaseExpired()).isTrue();
    assertThat(((ClaimResult.Existing) results.get(7)).record().fingerprint()).isEqualTo("fp-a");
    for (int i : new int[] {0, 1, 5, 6}) {
      ClaimRequest owner = batch.get(i);
      assertThat(
              store()
                  .complete(
                      new CompleteRequest(
                          owner.keyId(),
                          owner.ownerToken(),
                          RecordState.COMPLETED,
                          bytes("b" + i),
                          later.plusSeconds(1))))
          .as("request %d owns its key", i)
          .isTrue();
    }
    assertThat(existing(store().claim(claim(expired, newToken()).withNow(later))).attempt())
        .isEqualTo(2);
    switch (expectedDialect()) {
      case POSTGRESQL ->
          assertThat(statements).as("insert, select the rest, take over, reclaim").hasValue(4);
      case MYSQL ->
          assertThat(statements)
              .as("select, insert the absent, select them, take over, reclaim")
              .hasValue(5);
      case H2 -> {}
    }
  }

  @Test
  void aBatchThroughTheGuardOnTheSystemClockIsClaimedInWholeStatements() {
    AtomicInteger statements = new AtomicInteger();
    JdbcKeyStore countedStore = countingStore(statements);
    IdempotencyGuard guard = IdempotencyGuard.builder().store(countedStore).build();
    List<IdempotencyRequest> requests = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      requests.add(IdempotencyRequest.of("guard-batch:" + newKeyId(), TTL));
    }
    dev.idempotency.Batch<String> first = guard.claimBatch(requests, ResultCodec.string());
    first.toSend().forEach(item -> first.succeeded(item, "n_1"));
    first.record();
    statements.set(0);

    dev.idempotency.Batch<String> replay = guard.claimBatch(requests, ResultCodec.string());

    assertThat(replay.replayed()).hasSize(300);
    // every key of a chunk is claimed at one instant, else the store must go key by key
    switch (expectedDialect()) {
      case POSTGRESQL -> assertThat(statements).as("insert, then select").hasValue(2);
      case MYSQL -> assertThat(statements).as("select").hasValue(1);
      case H2 -> {}
    }
  }

  @Test
  void aBatchLargerThanTheMaximumIsRefusedBeforeAnyClaim() {
    JdbcKeyStore jdbcStore = (JdbcKeyStore) store();
    List<ClaimRequest> batch = new ArrayList<>();
    for (int i = 0; i <= jdbcStore.maxBatchSize(); i++) {
      batch.add(claim("too-many:" + newKeyId(), newToken()));
    }

    assertThatThrownBy(() -> jdbcStore.claimAll(batch))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("claimAll takes at most 500 requests, was 501");
    assertThat(jdbcStore.claim(batch.get(0))).isInstanceOf(ClaimResult.Claimed.class);
  }

  @Test
  void aBatchOfOddSizeClaimsExactlyItsKeys() {
    List<ClaimRequest> batch = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      batch.add(claim("odd:" + newKeyId(), newToken()));
    }
    ClaimRequest outsider = claim("odd:" + newKeyId(), newToken());

    List<ClaimResult> results = store().claimAll(batch);

    assertThat(results).hasSize(3).allMatch(r -> r instanceof ClaimResult.Claimed);
    assertThat(store().claim(outsider)).isInstanceOf(ClaimResult.Claimed.class);
    for (ClaimRequest request : batch) {
      assertThat(store().claim(claim(request.keyId(), newToken())))
          .isInstanceOf(ClaimResult.Existing.class);
    }
  }

  /** Statements of a single-key replay: one on PostgreSQL, two elsewhere. */
  int expectedReplayStatements() {
    return expectedDialect() == JdbcDialect.POSTGRESQL ? 1 : 2;
  }

  /**
   * Statements each operation adds to read the session's lock wait: 1 on H2, where a cancel does
   * not end a row-lock wait and the store bounds it with H2's {@code LOCK_TIMEOUT} instead.
   */
  int lockWaitReads() {
    return expectedDialect() == JdbcDialect.H2 ? 1 : 0;
  }

  @Test
  void noConnectionIsHeldWhileTheSenderRuns() {
    OpenConnectionCounter counter = new OpenConnectionCounter(dataSource());
    JdbcKeyStore counting = JdbcKeyStore.builder(counter).tableName(TABLE).build();
    IdempotencyGuard guard = IdempotencyGuard.builder().store(counting).build();
    List<Integer> openDuringSend = new ArrayList<>();

    guard.execute(
        "held:" + newKeyId(),
        TTL,
        ctx -> {
          openDuringSend.add(counter.open.get());
          return "n_1";
        });

    assertThat(openDuringSend).containsExactly(0);
    assertThat(counter.open).hasValue(0);
  }

  @Test
  void sqlFailureBecomesKeyStoreExceptionWithTheSqlStateAndSendsNothing() {
    JdbcKeyStore noTable =
        JdbcKeyStore.builder(dataSource()).tableName("idem_missing_table").build();
    IdempotencyGuard guard = IdempotencyGuard.builder().store(noTable).build();
    String key = "otp:+15550100042:missing";
    AtomicInteger sends = new AtomicInteger();

    assertThatThrownBy(() -> guard.execute(key, TTL, ctx -> "n_" + sends.incrementAndGet()))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("SQLState")
        .hasMessageNotContaining("+15550100042");
    assertThat(sends).hasValue(0);
  }

  /**
   * With raw keys at rest (a debugging option), a failing statement must not carry the raw key or
   * an owner token in any message of its exception chain: Jdbi renders bound parameters into its
   * messages by default, and those reach logs and events.
   */
  @Test
  void failuresCarryNeitherRawKeysNorOwnerTokensInAnyMessage() {
    JdbcKeyStore noTable = JdbcKeyStore.builder(dataSource()).tableName(freshTable()).build();
    String rawKey = "otp:+15550100042:" + newKeyId();
    String token = newToken();
    List<Throwable> failures = new ArrayList<>();
    ClaimRequest claim =
        new ClaimRequest(newKeyId(), token, "", T0, LONG_LEASE, LONG_RETENTION, true, rawKey);
    failures.add(catchThrowable(() -> noTable.claim(claim)));
    failures.add(
        catchThrowable(() -> noTable.complete(complete(claim.keyId(), token, bytes("r")))));
    failures.add(catchThrowable(() -> noTable.release(claim.keyId(), token)));
    failures.add(
        catchThrowable(
            () ->
                noTable.extend(
                    new dev.idempotency.spi.ExtendRequest(claim.keyId(), token, LONG_LEASE, T0))));
    IdempotencyGuard guard = IdempotencyGuard.builder().store(noTable).storeRawKeys(true).build();
    failures.add(catchThrowable(() -> guard.execute(rawKey, TTL, ctx -> "n_1")));

    for (Throwable failure : failures) {
      assertThat(failure).isInstanceOf(KeyStoreException.class);
      String chain = messagesOf(failure);
      assertThat(chain).contains("SQLState").doesNotContain(rawKey).doesNotContain(token);
    }
  }

  private static String messagesOf(Throwable failure) {
    StringBuilder text = new StringBuilder();
    for (Throwable t = failure; t != null; t = t.getCause()) {
      text.append(t).append('\n');
      for (Throwable suppressed : t.getSuppressed()) {
        text.append(suppressed).append('\n');
      }
    }
    return text.toString();
  }

  /**
   * A statement the database cannot answer (here, blocked on a row lock another transaction holds)
   * fails the operation in bounded time with {@link KeyStoreException}, instead of hanging the
   * caller for as long as the lock is held.
   */
  @Test
  void anOperationTheDatabaseCannotAnswerFailsInBoundedTime() throws Exception {
    String table = freshTable();
    JdbcKeyStore store =
        JdbcKeyStore.builder(dataSource())
            .tableName(table)
            .createSchemaIfMissing(true)
            .operationTimeout(Duration.ofSeconds(1))
            .build();
    String keyId = newKeyId();
    String token = newToken();
    store.claim(claim(keyId, token));
    try (Connection holder = dataSource().getConnection()) {
      holder.setAutoCommit(false);
      try (java.sql.PreparedStatement lock =
          holder.prepareStatement("UPDATE " + table + " SET attempt = attempt WHERE key_id = ?")) {
        lock.setString(1, keyId);
        lock.executeUpdate();
      }
      long start = System.nanoTime();
      CompletableFuture<Boolean> blocked =
          CompletableFuture.supplyAsync(() -> store.complete(complete(keyId, token, bytes("x"))));

      Throwable failure = catchThrowable(() -> blocked.get(15, TimeUnit.SECONDS));
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      holder.rollback();

      assertThat(failure)
          .isInstanceOf(java.util.concurrent.ExecutionException.class)
          .hasCauseInstanceOf(KeyStoreException.class);
      assertThat(millis)
          .as("failed within the operation timeout, not the lock's")
          .isLessThan(8_000);
      // ended on the database (query cancelled: 57014, MySQL/MariaDB 70100; H2's own lock timeout,
      // HYT00, may come first), not abandoned with its connection while it kept waiting for the
      // lock, to apply once the lock is gone
      assertThat(messagesOf(failure))
          .containsAnyOf("SQLState 57014", "SQLState 70100", "SQLState HYT00");
    }
    Poll.within(Duration.ofSeconds(10))
        .every(Duration.ofMillis(10))
        .until(
            "no statement still watched after they ended",
            OperationDeadlines::watched,
            watched -> watched == 0);
    assertThat(store.complete(complete(keyId, token, bytes("x"))))
        .as("the store works again once the database answers")
        .isTrue();
  }

  @Test
  void purgeDeletesOnlyExpiredRowsInBatches() {
    MutableClock clock = new MutableClock(T0);
    JdbcKeyStore purging = freshStore().build();
    JdbcPurger purger = purging.purger(clock);
    for (int i = 0; i < 25; i++) {
      purging.claim(claim(newKeyId(), newToken(), Duration.ofMinutes(1), Duration.ofHours(1)));
    }
    List<String> live = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      String keyId = newKeyId();
      live.add(keyId);
      purging.claim(claim(keyId, newToken(), Duration.ofMinutes(1), Duration.ofHours(3)));
    }
    clock.advance(Duration.ofHours(2));

    assertThat(purger.purgeExpired(10)).isEqualTo(10);
    assertThat(purger.purgeExpired(10)).isEqualTo(10);
    assertThat(purger.purgeExpired(10)).isEqualTo(5);
    assertThat(purger.purgeExpired(10)).isZero();
    for (String keyId : live) {
      ClaimRequest probe =
          new ClaimRequest(
              keyId,
              newToken(),
              "",
              clock.instant(),
              Duration.ofMinutes(1),
              Duration.ofHours(3),
              false,
              null);
      assertThat(purging.claim(probe))
          .as("a live row survives")
          .isInstanceOf(ClaimResult.Existing.class);
    }
  }

  @Test
  void threePurgersAtOnceDeleteEverythingExpiredWithoutFailing() throws Exception {
    MutableClock clock = new MutableClock(T0);
    JdbcKeyStore purging = freshStore().build();
    JdbcPurger purger = purging.purger(clock);
    int rows = 1_500;
    for (int i = 0; i < rows; i++) {
      purging.claim(claim(newKeyId(), newToken(), Duration.ofMinutes(1), Duration.ofHours(1)));
    }
    clock.advance(Duration.ofHours(2));
    CountDownLatch start = new CountDownLatch(1);
    List<java.util.concurrent.Callable<Long>> purgers = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      purgers.add(
          () -> {
            start.await();
            return purger.purgeAllExpired(20);
          });
    }

    List<Long> deleted = runAll(purgers, start);

    assertThat(deleted.stream().mapToLong(Long::longValue).sum()).isEqualTo(rows);
    assertThat(purger.purgeExpired(10)).isZero();
  }

  @Test
  void scheduledPurgeRunsAndCanBeCancelled() throws Exception {
    MutableClock clock = new MutableClock(T0);
    JdbcKeyStore purging = freshStore().build();
    JdbcPurger purger = purging.purger(clock);
    for (int i = 0; i < 20; i++) {
      purging.claim(claim(newKeyId(), newToken(), Duration.ofMinutes(1), Duration.ofHours(1)));
    }
    clock.advance(Duration.ofHours(2));
    var executor = java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
    try {
      var task = purger.schedulePurge(executor, Duration.ofMillis(20));
      Poll.within(Duration.ofSeconds(30))
          .every(Duration.ofMillis(10))
          .until("every row purged", () -> countRows(purging.tableName()), rows -> rows == 0);
      task.cancel(false);
      assertThat(countRows(purging.tableName())).isZero();
    } finally {
      executor.shutdownNow();
    }
  }

  private long countRows(String table) {
    return Jdbi.create(dataSource())
        .withHandle(h -> h.createQuery("SELECT COUNT(*) FROM " + table).mapTo(Long.class).one());
  }

  @Test
  void withDatabaseTimeASkewedApplicationClockBreaksNeitherLeasesNorWindows() throws Exception {
    String table = freshTable();
    JdbcKeyStore dbTime =
        JdbcKeyStore.builder(dataSource())
            .tableName(table)
            .createSchemaIfMissing(true)
            .databaseTime(true)
            .build();
    JdbcKeyStore appTime = JdbcKeyStore.builder(dataSource()).tableName(table).build();
    Clock skewed = Clock.offset(Clock.systemUTC(), Duration.ofMinutes(10));
    Duration ttl = Duration.ofMinutes(5);

    // Leases: a host ten minutes ahead must not take over a claim that is thirty seconds old.
    String key = "skew:" + newKeyId();
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch sending = new CountDownLatch(1);
    IdempotencyGuard honest =
        IdempotencyGuard.builder().store(dbTime).lease(Duration.ofSeconds(30)).build();
    CompletableFuture<String> first =
        CompletableFuture.supplyAsync(
            () ->
                honest.execute(
                    key,
                    ttl,
                    ctx -> {
                      sending.countDown();
                      release.await();
                      return "n_1";
                    }));
    assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
    IdempotencyGuard ahead =
        IdempotencyGuard.builder().store(dbTime).clock(skewed).inFlightWait(Duration.ZERO).build();
    assertThatThrownBy(() -> ahead.execute(key, ttl, ctx -> "duplicate"))
        .isInstanceOf(IdempotencyInProgressException.class);
    // Without database time the same skew takes a fresh claim over: the contrast this option fixes.
    String other = "skew:" + newKeyId();
    Duration hour = Duration.ofHours(1);
    dbTime.claim(
        new ClaimRequest(
            IdempotencyKey.digest(other),
            "live-owner",
            "",
            Instant.now(),
            Duration.ofSeconds(30),
            hour,
            true,
            null));
    IdempotencyGuard aheadOnAppTime =
        IdempotencyGuard.builder().store(appTime).clock(skewed).inFlightWait(Duration.ZERO).build();
    Outcome<String> takeover =
        aheadOnAppTime.executeForOutcome(
            IdempotencyRequest.of(other, hour), ResultCodec.string(), ctx -> "duplicate");
    assertThat(takeover.attempt()).as("app time: a live claim taken over").isEqualTo(2);
    release.countDown();
    assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("n_1");

    // Windows: the skewed host sees the five-minute window as still open and replays.
    String replayed = ahead.execute(key, ttl, ctx -> "duplicate");
    assertThat(replayed).isEqualTo("n_1");
    IdempotencyGuard aheadApp = IdempotencyGuard.builder().store(appTime).clock(skewed).build();
    String resent = aheadApp.execute(key, ttl, ctx -> "duplicate");
    assertThat(resent)
        .as("without database time the skewed host thinks the window is over")
        .isEqualTo("duplicate");
  }

  @Test
  void databaseTimeIgnoresTheRequestsTime() {
    JdbcKeyStore dbTime = freshStore().databaseTime(true).build();
    String keyId = newKeyId();
    dbTime.claim(
        new ClaimRequest(
            keyId,
            newToken(),
            "",
            Instant.EPOCH,
            Duration.ofMinutes(1),
            Duration.ofHours(1),
            true,
            null));

    ClaimResult later =
        dbTime.claim(
            new ClaimRequest(
                keyId,
                newToken(),
                "",
                Instant.now().plus(Duration.ofDays(1)),
                Duration.ofMinutes(1),
                Duration.ofHours(1),
                true,
                null));

    assertThat(dbTime.usesServerTime()).isTrue();
    assertThat(later).isInstanceOf(ClaimResult.Existing.class);
    assertThat(((ClaimResult.Existing) later).record().createdAt())
        .isBetween(Instant.now().minusSeconds(60), Instant.now().plusSeconds(60));
  }

  @Test
  void payloadAboveTheLimitIsRefused() {
    JdbcKeyStore limited =
        JdbcKeyStore.builder(dataSource()).tableName(TABLE).maxPayloadBytes(8).build();
    String keyId = newKeyId();
    String token = newToken();
    limited.claim(claim(keyId, token));

    assertThatThrownBy(() -> limited.complete(complete(keyId, token, new byte[9])))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
