package dev.idempotency.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idempotency.IdempotencyEvent;
import dev.idempotency.IdempotencyGuard;
import dev.idempotency.IdempotencyInProgressException;
import dev.idempotency.IdempotencyRequest;
import dev.idempotency.IdempotencyResultUnavailableException;
import dev.idempotency.KeyStoreException;
import dev.idempotency.Outcome;
import dev.idempotency.ResultCodec;
import dev.idempotency.inmemory.InMemoryKeyStore;
import dev.idempotency.spi.RecordState;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * A guarded call inside the caller's transaction ({@link JdbcKeyStore#joining(Connection)}), on a
 * real database: the key's record and an outbox row commit or roll back together, and concurrent
 * repeats wait on the database's lock. Run by each database's contract test.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class JoinedTransactionCases {

  static final Duration TTL = Duration.ofHours(24);
  private static final AtomicInteger TABLES = new AtomicInteger();

  /** The database. */
  abstract DataSource dataSource();

  /** The store's table. */
  abstract String recordTable();

  /** A JDBC URL with credentials, for the second JVM. */
  abstract String jdbcUrl();

  private JdbcKeyStore store;
  private IdempotencyGuard guard;
  private final List<IdempotencyEvent> events = new CopyOnWriteArrayList<>();
  private String outbox;
  private ExecutorService threads;

  @BeforeAll
  void createOutbox() throws SQLException {
    store =
        JdbcKeyStore.builder(dataSource())
            .tableName(recordTable())
            .createSchemaIfMissing(true)
            .build();
    guard = guard(Duration.ofSeconds(20));
    outbox = "outbox_" + ProcessHandle.current().pid() + "_" + TABLES.incrementAndGet();
    try (Connection connection = dataSource().getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute(
          "CREATE TABLE "
              + outbox
              + " (id VARCHAR(64) PRIMARY KEY, idem_key VARCHAR(200) NOT NULL,"
              + " body VARCHAR(200))");
    }
    threads = Executors.newCachedThreadPool();
  }

  @AfterAll
  void stop() {
    guard.close();
    threads.shutdownNow();
  }

  private IdempotencyGuard guard(Duration inFlightWait) {
    return IdempotencyGuard.builder()
        .store(store)
        .inFlightWait(inFlightWait)
        .listener(events::add)
        .build();
  }

  private static String key() {
    return "joined:" + UUID.randomUUID();
  }

  /** The enqueue: one outbox row for the key, through the caller's connection; its id. */
  private String enqueue(Connection connection, String key) throws SQLException {
    String id = UUID.randomUUID().toString();
    try (PreparedStatement insert =
        connection.prepareStatement(
            "INSERT INTO " + outbox + " (id, idem_key, body) VALUES (?, ?, ?)")) {
      insert.setString(1, id);
      insert.setString(2, key);
      insert.setString(3, "your code is 123456");
      insert.executeUpdate();
    }
    return id;
  }

  private int rows(String key) throws SQLException {
    try (Connection connection = dataSource().getConnection()) {
      return rows(connection, key);
    }
  }

  private int rows(Connection connection, String key) throws SQLException {
    try (PreparedStatement count =
        connection.prepareStatement("SELECT COUNT(*) FROM " + outbox + " WHERE idem_key = ?")) {
      count.setString(1, key);
      try (ResultSet result = count.executeQuery()) {
        result.next();
        return result.getInt(1);
      }
    }
  }

  /** One transaction on a new connection, committed if the work returns, rolled back if not. */
  private String inTransaction(IdempotencyGuard on, String key) throws SQLException {
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      try {
        String id =
            on.executeInTransaction(
                store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
        connection.commit();
        return id;
      } catch (RuntimeException | SQLException e) {
        connection.rollback();
        throw e;
      } finally {
        connection.setAutoCommit(true);
      }
    }
  }

  @Test
  void aCommitLeavesOneRecordAndOneRowAndARepeatReplaysWithoutWriting() throws Exception {
    int eventsBefore = events.size();
    String key = key();
    String id = inTransaction(guard, key);

    assertThat(rows(key)).isEqualTo(1);
    assertThat(guard.find(key))
        .hasValueSatisfying(r -> assertThat(r.state()).isEqualTo(RecordState.COMPLETED));

    AtomicInteger sends = new AtomicInteger();
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      Outcome<String> again =
          guard.executeInTransaction(
              store.joining(connection),
              IdempotencyRequest.of(key, TTL),
              ResultCodec.string(),
              ctx -> {
                sends.incrementAndGet();
                return enqueue(connection, key);
              });
      connection.commit();
      connection.setAutoCommit(true);
      assertThat(again.replayed()).isTrue();
      assertThat(again.value()).isEqualTo(id);
    }
    assertThat(sends).hasValue(0);
    assertThat(rows(key)).isEqualTo(1);
    assertThat(events.subList(eventsBefore, events.size()))
        .extracting(IdempotencyEvent::type)
        .containsSubsequence(IdempotencyEvent.Type.COMPLETED, IdempotencyEvent.Type.REPLAYED);
  }

  @Test
  void aRollbackAfterTheSenderWroteLeavesNeitherAndTheRetryRuns() throws Exception {
    String key = key();
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      guard.executeInTransaction(
          store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
      connection.rollback();
      connection.setAutoCommit(true);
    }
    assertThat(rows(key)).isZero();
    assertThat(guard.find(key)).isEmpty();

    String id = inTransaction(guard, key);
    assertThat(rows(key)).isEqualTo(1);
    assertThat(inTransaction(guard, key)).isEqualTo(id);
  }

  @Test
  void aSenderThatThrowsRollsBackBoth() throws Exception {
    String key = key();
    IllegalStateException boom = new IllegalStateException("template missing");
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      Throwable thrown =
          catchThrowable(
              () ->
                  guard.executeInTransaction(
                      store.joining(connection),
                      key,
                      TTL,
                      ctx -> {
                        enqueue(connection, key);
                        throw boom;
                      }));
      assertThat(thrown).isSameAs(boom);
      connection.rollback();
      connection.setAutoCommit(true);
    }
    assertThat(rows(key)).isZero();
    assertThat(guard.find(key)).isEmpty();
    inTransaction(guard, key);
    assertThat(rows(key)).isEqualTo(1);
  }

  /**
   * A sender that commits the caller's transaction (a misuse) committed the claim and its row: the
   * call fails, the outcome is recorded outside the transaction, and a repeat replays the row's id
   * instead of taking the claim over after its lease and enqueuing again.
   */
  @Test
  void aSenderThatCommitsTheTransactionFailsAndARepeatReplaysWhatCommitted() throws Exception {
    String key = key();
    String[] enqueued = new String[1];
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      assertThatThrownBy(
              () ->
                  guard.executeInTransaction(
                      store.joining(connection),
                      key,
                      TTL,
                      ctx -> {
                        enqueued[0] = enqueue(connection, key);
                        connection.commit();
                        return enqueued[0];
                      }))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("the sender committed the caller's transaction");
      connection.rollback();
      connection.setAutoCommit(true);
    }
    assertThat(rows(key)).isEqualTo(1);
    assertThat(inTransaction(guard, key)).isEqualTo(enqueued[0]);
    assertThat(rows(key)).isEqualTo(1);
  }

  /** A sender that rolls the caller's transaction back fails the call; the retry enqueues. */
  @Test
  void aSenderThatRollsTheTransactionBackFailsAndTheRetryRuns() throws Exception {
    String key = key();
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      assertThatThrownBy(
              () ->
                  guard.executeInTransaction(
                      store.joining(connection),
                      key,
                      TTL,
                      ctx -> {
                        String id = enqueue(connection, key);
                        connection.rollback();
                        return id;
                      }))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("no longer holds the claim");
      connection.rollback();
      connection.setAutoCommit(true);
    }
    assertThat(rows(key)).isZero();
    assertThat(guard.find(key)).isEmpty();
    inTransaction(guard, key);
    assertThat(rows(key)).isEqualTo(1);
  }

  @Test
  void aSenderThatThrowsLeavesNoClaimEvenIfTheCallerCommitsAnyway() throws Exception {
    String key = key();
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      assertThatThrownBy(
              () ->
                  guard.executeInTransaction(
                      store.joining(connection),
                      key,
                      TTL,
                      ctx -> {
                        throw new IllegalStateException("provider template missing");
                      }))
          .isInstanceOf(IllegalStateException.class);
      connection.commit();
      connection.setAutoCommit(true);
    }
    assertThat(guard.find(key)).isEmpty();
  }

  @Test
  void sixteenRepeatsWaitForTheOpenTransactionThenReplayItsCommit() throws Exception {
    String key = key();
    CountDownLatch started = new CountDownLatch(16);
    AtomicInteger enqueues = new AtomicInteger();
    String firstId;
    List<CompletableFuture<String>> repeats = new ArrayList<>();
    try (Connection first = dataSource().getConnection()) {
      first.setAutoCommit(false);
      firstId =
          guard.executeInTransaction(
              store.joining(first),
              key,
              TTL,
              ctx -> {
                enqueues.incrementAndGet();
                return enqueue(first, key);
              });
      for (int i = 0; i < 16; i++) {
        repeats.add(
            CompletableFuture.supplyAsync(
                () -> {
                  started.countDown();
                  return countedEnqueue(guard, key, enqueues);
                },
                threads));
      }
      assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
      // none may finish while the first transaction is open: the key's row is locked
      assertThat(repeats).noneMatch(CompletableFuture::isDone);
      first.commit();
      first.setAutoCommit(true);
    }
    for (CompletableFuture<String> repeat : repeats) {
      assertThat(repeat.get(30, TimeUnit.SECONDS)).isEqualTo(firstId);
    }
    assertThat(enqueues).hasValue(1);
    assertThat(rows(key)).isEqualTo(1);
  }

  @Test
  void afterTheOpenTransactionRollsBackOneRepeatEnqueuesAndTheOthersReplayIt() throws Exception {
    String key = key();
    CountDownLatch started = new CountDownLatch(16);
    AtomicInteger enqueues = new AtomicInteger();
    List<CompletableFuture<String>> repeats = new ArrayList<>();
    try (Connection first = dataSource().getConnection()) {
      first.setAutoCommit(false);
      guard.executeInTransaction(store.joining(first), key, TTL, ctx -> enqueue(first, key));
      for (int i = 0; i < 16; i++) {
        repeats.add(
            CompletableFuture.supplyAsync(
                () -> {
                  started.countDown();
                  return countedEnqueue(guard, key, enqueues);
                },
                threads));
      }
      assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
      first.rollback();
      first.setAutoCommit(true);
    }
    List<String> ids = new ArrayList<>();
    List<Throwable> failures = new ArrayList<>();
    for (CompletableFuture<String> repeat : repeats) {
      try {
        ids.add(repeat.get(30, TimeUnit.SECONDS));
      } catch (java.util.concurrent.ExecutionException e) {
        failures.add(e.getCause());
      }
    }
    assertThat(enqueues).hasValue(1);
    assertThat(rows(key)).isEqualTo(1);
    assertThat(ids).isNotEmpty().containsOnly(ids.get(0));
    // a database may pick waiters as deadlock victims (InnoDB does); each is told, none sends
    assertThat(failures)
        .allSatisfy(
            failure ->
                assertThat(failure)
                    .isInstanceOf(KeyStoreException.class)
                    .hasMessageContaining("deadlock or serialization victim"));
    System.out.printf(
        "joined rollback on %s: %d of 16 repeats replayed, %d were deadlock victims%n",
        store.dialect(), ids.size(), failures.size());
  }

  private String countedEnqueue(IdempotencyGuard on, String key, AtomicInteger enqueues) {
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      try {
        // a read first, as an application's transaction often does: under InnoDB's repeatable
        // read it fixes the snapshot, which predates the commit this call then waits for
        rows(connection, key);
        String id =
            on.executeInTransaction(
                store.joining(connection),
                key,
                TTL,
                ctx -> {
                  enqueues.incrementAndGet();
                  return enqueue(connection, key);
                });
        connection.commit();
        return id;
      } catch (RuntimeException e) {
        connection.rollback();
        throw e;
      } finally {
        connection.setAutoCommit(true);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void aSecondJvmKilledInsideItsTransactionLeavesNothingAndTheWaitingRepeatsEnqueueOnce()
      throws Exception {
    String key = key();
    Process child = startChild(key);
    try {
      awaitLine(child, "CLAIMED");
      AtomicInteger enqueues = new AtomicInteger();
      List<CompletableFuture<String>> repeats = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        repeats.add(
            CompletableFuture.supplyAsync(() -> countedEnqueue(guard, key, enqueues), threads));
      }
      child.destroyForcibly(); // SIGKILL: the database rolls back the dead connection's transaction
      assertThat(child.waitFor(60, TimeUnit.SECONDS)).isTrue();
      List<String> ids = new ArrayList<>();
      for (CompletableFuture<String> repeat : repeats) {
        try {
          ids.add(repeat.get(60, TimeUnit.SECONDS));
        } catch (java.util.concurrent.ExecutionException e) {
          assertThat(e.getCause())
              .isInstanceOf(KeyStoreException.class)
              .hasMessageContaining("deadlock or serialization victim");
        }
      }
      assertThat(enqueues).hasValue(1);
      assertThat(ids).isNotEmpty().containsOnly(ids.get(0)).doesNotContain("child-" + key);
      assertThat(rows(key)).isEqualTo(1);
    } finally {
      child.destroyForcibly();
    }
  }

  @Test
  void aSecondJvmThatCommitsIsReplayedByTheRepeatsThatWaitedForIt() throws Exception {
    String key = key();
    Process child = startChild(key);
    try {
      awaitLine(child, "CLAIMED");
      AtomicInteger enqueues = new AtomicInteger();
      List<CompletableFuture<String>> repeats = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        repeats.add(
            CompletableFuture.supplyAsync(() -> countedEnqueue(guard, key, enqueues), threads));
      }
      child.getOutputStream().write("COMMIT\n".getBytes(java.nio.charset.StandardCharsets.UTF_8));
      child.getOutputStream().flush();
      for (CompletableFuture<String> repeat : repeats) {
        assertThat(repeat.get(60, TimeUnit.SECONDS)).isEqualTo("child-" + key);
      }
      assertThat(child.waitFor(60, TimeUnit.SECONDS)).isTrue();
      assertThat(child.exitValue()).isZero();
      assertThat(enqueues).hasValue(0);
      assertThat(rows(key)).isEqualTo(1);
    } finally {
      child.destroyForcibly();
    }
  }

  private Process startChild(String key) throws java.io.IOException {
    String javaBinary =
        java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString();
    return new ProcessBuilder(
            javaBinary,
            "-cp",
            System.getProperty("java.class.path"),
            JoinedChildMain.class.getName(),
            jdbcUrl(),
            recordTable(),
            outbox,
            key)
        .redirectError(
            ProcessBuilder.Redirect.appendTo(new java.io.File("target/joined-child-stderr.txt")))
        .start();
  }

  private static void awaitLine(Process child, String prefix) throws Exception {
    java.io.BufferedReader out =
        new java.io.BufferedReader(
            new java.io.InputStreamReader(
                child.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
    String line =
        CompletableFuture.supplyAsync(
                () -> {
                  try {
                    return out.readLine();
                  } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                  }
                })
            .get(120, TimeUnit.SECONDS);
    assertThat(line).as("the second JVM's first line").startsWith(prefix);
  }

  @Test
  void aRepeatGivesUpWithInProgressOnceTheLockWaitRunsOut() throws Exception {
    String key = key();
    try (IdempotencyGuard impatient = guard(Duration.ofMillis(500));
        Connection first = dataSource().getConnection()) {
      first.setAutoCommit(false);
      String id =
          guard.executeInTransaction(store.joining(first), key, TTL, ctx -> enqueue(first, key));
      long start = System.nanoTime();
      Throwable thrown = catchThrowable(() -> inTransaction(impatient, key));
      long waitedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertThat(thrown).isInstanceOf(IdempotencyInProgressException.class);
      // MySQL/MariaDB wait in whole seconds: 500 ms becomes 1 s
      assertThat(waitedMillis).isGreaterThanOrEqualTo(400).isLessThan(5_000);
      first.commit();
      first.setAutoCommit(true);
      assertThat(inTransaction(impatient, key)).isEqualTo(id);
    }
    assertThat(rows(key)).isEqualTo(1);
  }

  /**
   * A usual-mode repeat of a key an open joined transaction holds waits on the row's lock until the
   * operation timeout ends that wait: a key in flight (409), not a store failure; after the commit
   * it replays the committed id.
   */
  @Test
  void aUsualRepeatOfAKeyInAnOpenJoinedTransactionIsInProgressThenReplays() throws Exception {
    String key = key();
    JdbcKeyStore quick =
        JdbcKeyStore.builder(dataSource())
            .tableName(recordTable())
            .operationTimeout(Duration.ofSeconds(1))
            .build();
    try (IdempotencyGuard usual =
            IdempotencyGuard.builder().store(quick).inFlightWait(Duration.ofMillis(500)).build();
        Connection first = dataSource().getConnection()) {
      first.setAutoCommit(false);
      String id =
          guard.executeInTransaction(store.joining(first), key, TTL, ctx -> enqueue(first, key));
      Throwable thrown = catchThrowable(() -> usual.execute(key, TTL, ctx -> "sent"));
      assertThat(thrown).isInstanceOf(IdempotencyInProgressException.class);
      first.commit();
      first.setAutoCommit(true);
      assertThat(usual.execute(key, TTL, ctx -> "sent again")).isEqualTo(id);
    }
    assertThat(rows(key)).isEqualTo(1);
  }

  @Test
  void theSessionsLockWaitIsRestoredAfterAClaim() throws Exception {
    String key = key();
    try (Connection connection = dataSource().getConnection()) {
      String before = lockWait(connection);
      connection.setAutoCommit(false);
      guard.executeInTransaction(
          store.joining(connection), key, TTL, ctx -> enqueue(connection, key));
      assertThat(lockWait(connection)).isEqualTo(before);
      connection.commit();
      connection.setAutoCommit(true);
      assertThat(lockWait(connection)).isEqualTo(before);
    }
  }

  private String lockWait(Connection connection) throws SQLException {
    String read = store.dialect().statements(recordTable(), false, true).readLockWait();
    try (Statement statement = connection.createStatement();
        ResultSet result = statement.executeQuery(read)) {
      result.next();
      return result.getString(1);
    }
  }

  @Test
  void aResultThatCannotBeEncodedIsRecordedAsSentAndTheEnqueueCommits() throws Exception {
    String key = key();
    ResultCodec<String> broken =
        new ResultCodec<>() {
          @Override
          public byte[] encode(String value) {
            throw new IllegalArgumentException("cannot encode");
          }

          @Override
          public String decode(byte[] bytes) {
            return new String(bytes, java.nio.charset.StandardCharsets.UTF_8);
          }
        };
    try (Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      Outcome<String> outcome =
          guard.executeInTransaction(
              store.joining(connection),
              IdempotencyRequest.of(key, TTL),
              broken,
              ctx -> enqueue(connection, key));
      connection.commit();
      connection.setAutoCommit(true);
      assertThat(outcome.value()).isNotNull();
    }
    assertThat(rows(key)).isEqualTo(1);
    assertThatThrownBy(() -> inTransaction(guard, key))
        .isInstanceOf(IdempotencyResultUnavailableException.class);
    assertThat(rows(key)).isEqualTo(1);
  }

  @Test
  void findAndForgetSeeTheCommittedRecord() throws Exception {
    String key = key();
    inTransaction(guard, key);
    assertThat(guard.find(key)).isPresent();
    assertThat(guard.forget(key)).isTrue();
    inTransaction(guard, key);
    assertThat(rows(key)).isEqualTo(2);
  }

  @Test
  void aConnectionInAutoCommitModeIsRefused() throws Exception {
    try (Connection connection = dataSource().getConnection()) {
      assertThatThrownBy(() -> store.joining(connection))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("auto-commit");
    }
  }

  @Test
  void aTransactionOfAnotherStoreIsRefused() throws Exception {
    String key = key();
    try (IdempotencyGuard inMemory =
            IdempotencyGuard.builder().store(InMemoryKeyStore.builder().build()).build();
        Connection connection = dataSource().getConnection()) {
      connection.setAutoCommit(false);
      assertThatThrownBy(
              () ->
                  inMemory.executeInTransaction(
                      store.joining(connection), key, TTL, ctx -> enqueue(connection, key)))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("another store");
      connection.rollback();
      connection.setAutoCommit(true);
    }
    assertThat(rows(key)).isZero();
  }
}
