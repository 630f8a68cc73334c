package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jdbi.v3.core.Handle;
import org.jdbi.v3.core.Jdbi;
import org.jdbi.v3.core.JdbiException;
import org.jdbi.v3.core.statement.PreparedBatch;
import org.jdbi.v3.core.statement.Query;
import org.jdbi.v3.core.statement.SqlStatements;
import org.jdbi.v3.core.statement.StatementExceptions;
import org.jdbi.v3.core.statement.Update;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KeyStore} in a relational database: one row per key id under a primary key, on
 * PostgreSQL, MySQL/MariaDB or H2.
 *
 * <pre>{@code
 * JdbcKeyStore store = JdbcKeyStore.builder(dataSource)
 *     .tableName("idempotency_records")   // the default; may be schema-qualified
 *     .createSchemaIfMissing(true)        // or run the shipped DDL with Flyway/Liquibase
 *     .databaseTime(true)                 // leases and windows on the database's clock
 *     .build();
 * }</pre>
 *
 * <h2>Algorithm and round trips</h2>
 *
 * <ol>
 *   <li><b>Claim</b>: an insert-if-absent ({@code ON CONFLICT DO NOTHING}, {@code INSERT IGNORE},
 *       or H2's {@code MERGE ... WHEN NOT MATCHED}). One inserted row means the key is ours: a
 *       first send costs this one statement.
 *   <li>Otherwise one {@code SELECT} reads the row and the database's time: a replay costs two
 *       statements in all. On PostgreSQL both are one statement ({@code WITH ins AS (INSERT ... ON
 *       CONFLICT DO NOTHING RETURNING 1) SELECT ...}), so a replay costs one; in the rare case
 *       where the conflicting row was committed after that statement's snapshot began, it is run
 *       again.
 *   <li>If that row is past its window, or in progress with an expired lease (takeover), one
 *       conditional {@code UPDATE} takes it, compare-and-set on the owner token it saw: three
 *       statements, only in those rare cases.
 *   <li><b>Complete</b> and <b>release</b> are one statement each, conditional on the owner token.
 * </ol>
 *
 * <p>So a first send costs two statements (insert, complete) and a replay two (insert, select), one
 * on PostgreSQL. Every statement runs in auto-commit on a connection borrowed for that operation
 * only: no connection, transaction or row lock is held while the sender runs.
 *
 * <p><b>Time.</b> By default leases and windows use each request's time, that is the guard's clock.
 * With {@link Builder#databaseTime(boolean) databaseTime(true)} every deadline is computed in SQL
 * from the database's clock, so application hosts with skewed clocks still agree.
 *
 * <p><b>Purge.</b> Rows past their window count as absent at once; {@link #purgeExpired(int)}
 * deletes them in bounded batches, and {@link #schedulePurge} runs that periodically.
 *
 * <p>Thread-safe. Failures of the database become {@link KeyStoreException} with the SQLState,
 * never with a key in clear.
 */
public final class JdbcKeyStore implements KeyStore {

  /** The default table name. */
  public static final String DEFAULT_TABLE_NAME = "idempotency_records";

  /** The default number of rows one purge statement deletes. */
  public static final int DEFAULT_PURGE_BATCH_SIZE = 1_000;

  /** The default bound on one store operation's statements: 5 seconds. */
  public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(5);

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);
  private static final int MAX_CLAIM_ROUNDS = 16;
  private static final int MAX_TRANSIENT_ATTEMPTS = 5;

  private final Jdbi jdbi;
  private final JdbcDialect dialect;
  private final String tableName;
  private final boolean databaseTime;
  private final Clock clock;
  private final int maxPayloadBytes;
  private final int operationTimeoutMillis;
  private final int queryTimeoutSeconds;
  private volatile boolean networkTimeoutSupported = true;
  private final Statements sql;

  private JdbcKeyStore(Builder builder) {
    this.jdbi = builder.jdbi;
    this.operationTimeoutMillis =
        (int) Math.min(Integer.MAX_VALUE, builder.operationTimeout.toMillis());
    this.queryTimeoutSeconds =
        (int) Math.max(1, Math.min(Integer.MAX_VALUE, builder.operationTimeout.toSeconds()));
    this.tableName = builder.tableName;
    this.databaseTime = builder.databaseTime;
    this.clock = builder.clock;
    this.maxPayloadBytes = builder.maxPayloadBytes;
    this.dialect = builder.dialect != null ? builder.dialect : detectDialect(jdbi);
    this.sql = new Statements(dialect, tableName, databaseTime);
    if (builder.createSchemaIfMissing) {
      createSchema();
    }
  }

  /**
   * Starts a builder on a {@link DataSource}, ideally a connection pool.
   *
   * @param dataSource the database
   * @return a new builder
   */
  public static Builder builder(DataSource dataSource) {
    return new Builder(
        Jdbi.create(Objects.requireNonNull(dataSource, "dataSource must not be null")));
  }

  /**
   * Starts a builder on an existing {@link Jdbi}.
   *
   * @param jdbi the Jdbi instance
   * @return a new builder
   */
  public static Builder builder(Jdbi jdbi) {
    return new Builder(Objects.requireNonNull(jdbi, "jdbi must not be null"));
  }

  /**
   * The DDL this store runs for {@code createSchemaIfMissing}, for a dialect and a table name.
   *
   * @param dialect the dialect
   * @param tableName a plain identifier, optionally schema-qualified
   * @return the SQL script
   */
  public static String schemaSql(JdbcDialect dialect, String tableName) {
    Objects.requireNonNull(dialect, "dialect must not be null");
    Statements.requireTableName(tableName);
    try (InputStream in =
        JdbcKeyStore.class.getClassLoader().getResourceAsStream(dialect.schemaResource())) {
      if (in == null) {
        throw new IllegalStateException("missing resource " + dialect.schemaResource());
      }
      return Statements.schema(new String(in.readAllBytes(), StandardCharsets.UTF_8), tableName);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public ClaimResult claim(ClaimRequest request) {
    Objects.requireNonNull(request, "request");
    return call("claim", handle -> claimOne(handle, request));
  }

  private ClaimResult claimOne(Handle handle, ClaimRequest request) {
    for (int round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      Optional<Row> row;
      if (sql.insertOrSelect != null) {
        InsertOrSelect seen =
            bindClaim(handle.createQuery(sql.insertOrSelect), request)
                .map((rs, ctx) -> InsertOrSelect.read(rs))
                .one();
        if (seen.inserted()) {
          return new ClaimResult.Claimed(1, false);
        }
        row = seen.row();
      } else if (insertIfAbsent(handle, request)) {
        return new ClaimResult.Claimed(1, false);
      } else {
        row = select(handle, request);
      }
      if (row.isEmpty()) {
        // released or purged since the insert, or (PostgreSQL) inserted by a transaction that
        // committed after this statement's snapshot: try again
        continue;
      }
      ClaimResult result = decide(handle, request, row.get());
      if (result != null) {
        return result;
      }
    }
    throw new KeyStoreException(
        "JDBC store: the claim of key "
            + request.keyId()
            + " lost "
            + MAX_CLAIM_ROUNDS
            + " races in a row",
        null);
  }

  /** Returns the outcome for a row that exists, or null if it changed under us (retry). */
  private ClaimResult decide(Handle handle, ClaimRequest request, Row row) {
    StoredRecord record = row.record;
    if (row.retainUntil <= row.databaseNow) {
      int taken =
          bindClaim(handle.createUpdate(sql.reclaimExpired), request)
              .bind("seenToken", row.ownerToken)
              .bind("seenState", record.state().name())
              .execute();
      return taken == 1 ? new ClaimResult.Claimed(1, false) : null;
    }
    boolean leaseExpired =
        record.state() == RecordState.IN_PROGRESS && row.leaseUntil <= row.databaseNow;
    if (leaseExpired
        && request.takeOverExpiredLease()
        && record.fingerprint().equals(request.fingerprint())) {
      int taken =
          bindClaim(handle.createUpdate(sql.takeOver), request)
              .bind("seenToken", row.ownerToken)
              .execute();
      return taken == 1 ? new ClaimResult.Claimed(record.attempt() + 1, true) : null;
    }
    return new ClaimResult.Existing(record, leaseExpired);
  }

  private boolean insertIfAbsent(Handle handle, ClaimRequest request) {
    try {
      return bindClaim(handle.createUpdate(sql.insertIfAbsent), request).execute() == 1;
    } catch (JdbiException e) {
      if (isUniqueViolation(e)) {
        return false; // a concurrent insert won between the check and the insert
      }
      throw e;
    }
  }

  private <S extends org.jdbi.v3.core.statement.SqlStatement<S>> S bindClaim(
      S statement, ClaimRequest request) {
    bindNow(statement, request.now());
    return statement
        .bind("keyId", request.keyId())
        .bind("ownerToken", request.ownerToken())
        .bind("fingerprint", request.fingerprint())
        .bind("leaseMillis", request.lease().toMillis())
        .bind("retentionMillis", request.retention().toMillis())
        .bind("debugKey", request.debugKey());
  }

  private Optional<Row> select(Handle handle, ClaimRequest request) {
    Query query = handle.createQuery(sql.select).bind("keyId", request.keyId());
    if (!databaseTime) {
      query.bind("now", request.now().toEpochMilli());
    }
    return query.map((rs, ctx) -> Row.read(rs)).findOne();
  }

  /**
   * Claims a batch reading first: one select of every key of the chunk; if some are absent, one
   * multi-row insert-if-absent of those and one select of them again (a row holding this batch's
   * owner token was inserted by it). A replayed chunk so costs one statement, a new one three. Rows
   * past their window or with an expired lease are taken with the single-key compare-and-set. On
   * H2, which runs in-process, keys are claimed one by one.
   */
  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    if (requests.size() > maxBatchSize()) {
      throw new IllegalArgumentException(
          "claimAll takes at most " + maxBatchSize() + " requests, was " + requests.size());
    }
    if (!sql.supportsMultiRowInsert() || !sameTiming(requests)) {
      return KeyStore.super.claimAll(requests);
    }
    return call(
        "claim a batch",
        handle -> {
          Map<String, Row> rows = selectAll(handle, requests);
          List<ClaimRequest> absent = new ArrayList<>();
          for (ClaimRequest request : requests) {
            if (!rows.containsKey(request.keyId())) {
              absent.add(request);
            }
          }
          if (!absent.isEmpty()) {
            insertAll(handle, absent);
            rows.putAll(selectAll(handle, absent));
          }
          List<ClaimResult> results = new ArrayList<>(requests.size());
          for (ClaimRequest request : requests) {
            Row row = rows.get(request.keyId());
            ClaimResult result = null;
            if (row != null && row.ownerToken.equals(request.ownerToken())) {
              result = new ClaimResult.Claimed(row.record.attempt(), row.record.attempt() > 1);
            } else if (row != null) {
              result = decide(handle, request, row);
            }
            results.add(result != null ? result : claimOne(handle, request));
          }
          return results;
        });
  }

  /**
   * Inserts-if-absent a batch in one statement. Statements come in power-of-two sizes, so that a
   * store prepares at most ten of them; the last request fills the rows past the batch (inserting
   * the same key twice in one statement is a no-op).
   */
  private void insertAll(Handle handle, List<ClaimRequest> requests) {
    int size = Statements.paddedSize(requests.size(), maxBatchSize());
    ClaimRequest first = requests.get(0);
    Update insert = handle.createUpdate(sql.insertAllIfAbsent(size));
    bindNow(insert, first.now());
    insert
        .bind("leaseMillis", first.lease().toMillis())
        .bind("retentionMillis", first.retention().toMillis());
    for (int i = 0; i < size; i++) {
      ClaimRequest request = requests.get(Math.min(i, requests.size() - 1));
      insert
          .bind("keyId_" + i, request.keyId())
          .bind("ownerToken_" + i, request.ownerToken())
          .bind("fingerprint_" + i, request.fingerprint())
          .bind("debugKey_" + i, request.debugKey());
    }
    insert.execute();
  }

  /**
   * Reads the rows of a batch in one statement: by an array on PostgreSQL, elsewhere by an {@code
   * IN} list padded like {@link #insertAll}.
   */
  private Map<String, Row> selectAll(Handle handle, List<ClaimRequest> requests) {
    Query select;
    if (sql.selectAny != null) {
      List<String> keyIds = new ArrayList<>(requests.size());
      for (ClaimRequest request : requests) {
        keyIds.add(request.keyId());
      }
      select = handle.createQuery(sql.selectAny).bindArray("keyIds", String.class, keyIds);
    } else {
      int size = Statements.paddedSize(requests.size(), maxBatchSize());
      select = handle.createQuery(sql.selectAll(size));
      for (int i = 0; i < size; i++) {
        select.bind("keyId_" + i, requests.get(Math.min(i, requests.size() - 1)).keyId());
      }
    }
    if (!databaseTime) {
      select.bind("now", requests.get(0).now().toEpochMilli());
    }
    Map<String, Row> rows = new HashMap<>();
    select
        .map((rs, ctx) -> Map.entry(rs.getString("key_id"), Row.read(rs)))
        .forEach(e -> rows.put(e.getKey(), e.getValue()));
    return rows;
  }

  /** Whether a batch shares one time, lease and window, so one statement can bind them once. */
  private static boolean sameTiming(List<ClaimRequest> requests) {
    ClaimRequest first = requests.get(0);
    for (ClaimRequest request : requests) {
      if (!request.now().equals(first.now())
          || !request.lease().equals(first.lease())
          || !request.retention().equals(first.retention())) {
        return false;
      }
    }
    return true;
  }

  /**
   * Writes a batch of outcomes as one JDBC batch of the fenced update (one round trip with the
   * PostgreSQL and MariaDB drivers).
   */
  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    for (CompleteRequest request : requests) {
      request.requirePayloadAtMost(maxPayloadBytes);
    }
    return call(
        "complete a batch",
        handle -> {
          PreparedBatch batch = handle.prepareBatch(sql.complete);
          for (CompleteRequest request : requests) {
            batch
                .bind("keyId", request.keyId())
                .bind("ownerToken", request.ownerToken())
                .bind("state", request.state().name())
                .bind("payload", request.payload());
            if (!databaseTime) {
              batch.bind("now", request.now().toEpochMilli());
            }
            batch.add();
          }
          int[] counts = batch.execute();
          List<Boolean> results = new ArrayList<>(counts.length);
          for (int i = 0; i < counts.length; i++) {
            results.add(
                counts[i] == java.sql.Statement.SUCCESS_NO_INFO
                    ? written(handle, requests.get(i))
                    : counts[i] == 1);
          }
          return results;
        });
  }

  /** For drivers that report a batched update as "done, count unknown": reads the row back. */
  private boolean written(Handle handle, CompleteRequest request) {
    Query query = handle.createQuery(sql.select).bind("keyId", request.keyId());
    if (!databaseTime) {
      query.bind("now", request.now().toEpochMilli());
    }
    return query
        .map((rs, ctx) -> Row.read(rs))
        .findOne()
        .map(
            row ->
                row.ownerToken.equals(request.ownerToken())
                    && row.record.state() == request.state())
        .orElse(false);
  }

  /** The largest batch: 500 keys, which keeps a multi-row statement under every driver's limits. */
  @Override
  public int maxBatchSize() {
    return 500;
  }

  @Override
  public boolean complete(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    request.requirePayloadAtMost(maxPayloadBytes);
    return call(
        "complete",
        handle -> {
          Update update =
              handle
                  .createUpdate(sql.complete)
                  .bind("keyId", request.keyId())
                  .bind("ownerToken", request.ownerToken())
                  .bind("state", request.state().name())
                  .bind("payload", request.payload());
          bindNow(update, request.now());
          return update.execute() == 1;
        });
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    return call(
        "release",
        handle ->
            handle
                    .createUpdate(sql.release)
                    .bind("keyId", keyId)
                    .bind("ownerToken", ownerToken)
                    .execute()
                == 1);
  }

  @Override
  public boolean extend(ExtendRequest request) {
    Objects.requireNonNull(request, "request");
    return call(
        "extend",
        handle -> {
          Update update = bindExtend(handle.createUpdate(sql.extend), request);
          bindNow(update, request.now());
          return update.execute() == 1;
        });
  }

  /** Renews a batch of leases as one JDBC batch of the fenced update: one round trip. */
  @Override
  public List<Boolean> extendAll(List<ExtendRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    return call(
        "extend a batch",
        handle -> {
          PreparedBatch batch = handle.prepareBatch(sql.extend);
          for (ExtendRequest request : requests) {
            bindExtend(batch, request);
            if (!databaseTime) {
              batch.bind("now", request.now().toEpochMilli());
            }
            batch.add();
          }
          int[] counts = batch.execute();
          List<Boolean> results = new ArrayList<>(counts.length);
          for (int i = 0; i < counts.length; i++) {
            results.add(
                counts[i] == java.sql.Statement.SUCCESS_NO_INFO
                    ? extended(handle, requests.get(i))
                    : counts[i] == 1);
          }
          return results;
        });
  }

  private static <S extends org.jdbi.v3.core.statement.SqlStatement<S>> S bindExtend(
      S statement, ExtendRequest request) {
    return statement
        .bind("keyId", request.keyId())
        .bind("ownerToken", request.ownerToken())
        .bind("leaseMillis", request.lease().toMillis());
  }

  /** For drivers that report a batched update as "done, count unknown": reads the row back. */
  private boolean extended(Handle handle, ExtendRequest request) {
    Query query = handle.createQuery(sql.select).bind("keyId", request.keyId());
    if (!databaseTime) {
      query.bind("now", request.now().toEpochMilli());
    }
    return query
        .map((rs, ctx) -> Row.read(rs))
        .findOne()
        .map(
            row ->
                row.ownerToken.equals(request.ownerToken())
                    && row.record.state() == RecordState.IN_PROGRESS
                    && row.retainUntil > row.databaseNow)
        .orElse(false);
  }

  @Override
  public int maxPayloadBytes() {
    return maxPayloadBytes;
  }

  /** {@code jdbc}. */
  @Override
  public String kind() {
    return "jdbc";
  }

  @Override
  public boolean usesServerTime() {
    return databaseTime;
  }

  /**
   * Deletes at most {@code limit} rows whose window has passed, in one statement. Safe to run from
   * several instances at once (on PostgreSQL concurrent purgers skip each other's rows).
   *
   * @param limit the most rows to delete, at least 1
   * @return how many rows were deleted
   * @throws KeyStoreException if the database failed
   */
  public int purgeExpired(int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be at least 1, was " + limit);
    }
    return call(
        "purge",
        handle -> {
          Update update = handle.createUpdate(sql.purgeBatch).bind("limit", limit);
          if (!databaseTime) {
            update.bind("now", clock.millis());
          }
          return update.execute();
        });
  }

  /**
   * Deletes every row whose window has passed, in batches of {@code batchSize}, until a batch
   * deletes fewer.
   *
   * @param batchSize rows per statement, at least 1
   * @return how many rows were deleted in all
   * @throws KeyStoreException if the database failed
   */
  public long purgeAllExpired(int batchSize) {
    long total = 0;
    int deleted;
    do {
      deleted = purgeExpired(batchSize);
      total += deleted;
    } while (deleted == batchSize);
    return total;
  }

  /**
   * Runs {@link #purgeAllExpired(int)} every {@code interval} on the given executor, with {@link
   * #DEFAULT_PURGE_BATCH_SIZE}-row batches. A failed run is logged and the schedule goes on. Every
   * instance of a service may schedule it. Cancel the returned future to stop.
   *
   * <p>A good interval is a fraction of the shortest window in use: every 5 to 15 minutes for
   * windows of hours. Rows past their window already count as absent, so the interval bounds only
   * the table's size, never correctness.
   *
   * @param executor the executor that runs the purge
   * @param interval the time between runs, positive
   * @return the scheduled task
   */
  public ScheduledFuture<?> schedulePurge(ScheduledExecutorService executor, Duration interval) {
    Objects.requireNonNull(executor, "executor must not be null");
    Objects.requireNonNull(interval, "interval must not be null");
    if (interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("interval must be positive, was " + interval);
    }
    return executor.scheduleWithFixedDelay(
        () -> {
          try {
            long deleted = purgeAllExpired(DEFAULT_PURGE_BATCH_SIZE);
            log.debug("Purged {} expired idempotency records from {}", deleted, tableName);
          } catch (RuntimeException e) {
            log.warn(
                "Purging expired idempotency records from {} failed; will retry", tableName, e);
          }
        },
        interval.toMillis(),
        interval.toMillis(),
        TimeUnit.MILLISECONDS);
  }

  /**
   * The dialect in use.
   *
   * @return the dialect
   */
  public JdbcDialect dialect() {
    return dialect;
  }

  /**
   * The table in use.
   *
   * @return the table name as configured
   */
  public String tableName() {
    return tableName;
  }

  private void createSchema() {
    String script = schemaSql(dialect, tableName);
    call(
        "create schema",
        handle -> {
          handle.createScript(script).execute();
          return null;
        });
  }

  private void bindNow(org.jdbi.v3.core.statement.SqlStatement<?> statement, Instant now) {
    if (!databaseTime) {
      statement.bind("now", now.toEpochMilli());
    }
  }

  /**
   * Runs one operation on a borrowed connection. A deadlock or serialization failure rolled the
   * statement back, and every operation here is safe to run again then, so those are retried a few
   * times with a jittered pause (InnoDB reports concurrent purges that way).
   */
  private <R> R call(String operation, org.jdbi.v3.core.HandleCallback<R, RuntimeException> work) {
    for (int attempt = 1; ; attempt++) {
      try {
        return jdbi.withHandle(
            handle -> {
              // The handle's config is its own copy: the user's Jdbi stays as configured.
              handle
                  .getConfig(SqlStatements.class)
                  .setUnusedBindingAllowed(true)
                  .setQueryTimeout(queryTimeoutSeconds);
              // Never render bound values (raw debug keys, owner tokens) into exception messages.
              handle
                  .getConfig(StatementExceptions.class)
                  .setMessageRendering(StatementExceptions.MessageRendering.NONE);
              int previousTimeout = boundNetworkTime(handle.getConnection());
              try {
                return work.withHandle(handle);
              } finally {
                restoreNetworkTime(handle.getConnection(), previousTimeout);
              }
            });
      } catch (KeyStoreException e) {
        throw e;
      } catch (JdbiException e) {
        if (attempt < MAX_TRANSIENT_ATTEMPTS && isTransient(e) && pause(attempt)) {
          log.debug("Retrying the {} after a transient failure{}", operation, describe(e));
          continue;
        }
        throw new KeyStoreException(
            "JDBC store failed to " + operation + " on " + tableName + describe(e), e);
      }
    }
  }

  /**
   * Bounds every read of this operation on the socket ({@link Connection#setNetworkTimeout}), so a
   * database that stopped answering fails the operation in bounded time instead of hanging; returns
   * the connection's previous timeout, or -1 where the driver has none (H2 in memory).
   */
  private int boundNetworkTime(Connection connection) {
    if (!networkTimeoutSupported) {
      return -1;
    }
    try {
      int previous = connection.getNetworkTimeout();
      connection.setNetworkTimeout(Runnable::run, operationTimeoutMillis);
      return previous;
    } catch (SQLException | UnsupportedOperationException | AbstractMethodError e) {
      networkTimeoutSupported = false;
      log.debug("The JDBC driver has no network timeout; relying on the query timeout", e);
      return -1;
    }
  }

  private static void restoreNetworkTime(Connection connection, int previous) {
    if (previous < 0) {
      return;
    }
    try {
      connection.setNetworkTimeout(Runnable::run, previous);
    } catch (SQLException e) {
      log.debug("Could not restore a connection's network timeout (it failed meanwhile)", e);
    }
  }

  private static boolean pause(int attempt) {
    try {
      Thread.sleep(ThreadLocalRandom.current().nextLong(5, 20L << attempt));
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** Deadlock victims and serialization failures: the statement was rolled back. */
  private static boolean isTransient(JdbiException e) {
    SQLException sqlException = findSqlException(e);
    if (sqlException == null) {
      return false;
    }
    String state = sqlException.getSQLState();
    return "40001".equals(state) || "40P01".equals(state) || sqlException.getErrorCode() == 1213;
  }

  private static String describe(JdbiException e) {
    SQLException sqlException = findSqlException(e);
    return sqlException == null
        ? ""
        : " (SQLState "
            + sqlException.getSQLState()
            + ", error "
            + sqlException.getErrorCode()
            + ")";
  }

  private static boolean isUniqueViolation(JdbiException e) {
    SQLException sqlException = findSqlException(e);
    if (sqlException == null) {
      return false;
    }
    String state = sqlException.getSQLState();
    return "23505".equals(state) || sqlException.getErrorCode() == 1062;
  }

  private static SQLException findSqlException(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof SQLException sqlException) {
        return sqlException;
      }
    }
    return null;
  }

  private static JdbcDialect detectDialect(Jdbi jdbi) {
    try {
      return jdbi.withHandle(
          handle ->
              JdbcDialect.fromProductName(
                  handle.getConnection().getMetaData().getDatabaseProductName()));
    } catch (JdbiException e) {
      throw new KeyStoreException("JDBC store could not detect the dialect" + describe(e), e);
    } catch (SQLException e) {
      throw new KeyStoreException(
          "JDBC store could not detect the dialect (SQLState " + e.getSQLState() + ")", e);
    }
  }

  /**
   * What the one-statement claim saw: inserted, or else the row as its snapshot shows it (empty if
   * the conflicting row is not visible there).
   */
  private record InsertOrSelect(boolean inserted, Optional<Row> row) {
    static InsertOrSelect read(ResultSet rs) throws SQLException {
      if (rs.getInt("inserted") == 1) {
        return new InsertOrSelect(true, Optional.empty());
      }
      return new InsertOrSelect(
          false, rs.getString("state") == null ? Optional.empty() : Optional.of(Row.read(rs)));
    }
  }

  /** One row as read, with the owner token (never leaves the store) and the database's time. */
  private static final class Row {
    final StoredRecord record;
    final String ownerToken;
    final long leaseUntil;
    final long retainUntil;
    final long databaseNow;

    private Row(
        StoredRecord record, String ownerToken, long leaseUntil, long retainUntil, long now) {
      this.record = record;
      this.ownerToken = ownerToken;
      this.leaseUntil = leaseUntil;
      this.retainUntil = retainUntil;
      this.databaseNow = now;
    }

    static Row read(ResultSet rs) throws SQLException {
      long completedAt = rs.getLong("completed_at");
      Instant completed = rs.wasNull() ? null : Instant.ofEpochMilli(completedAt);
      long leaseUntil = rs.getLong("lease_until");
      long retainUntil = rs.getLong("retain_until");
      StoredRecord record =
          new StoredRecord(
              RecordState.valueOf(rs.getString("state")),
              rs.getInt("attempt"),
              rs.getString("fingerprint"),
              rs.getBytes("payload"),
              Instant.ofEpochMilli(rs.getLong("created_at")),
              completed,
              Instant.ofEpochMilli(leaseUntil),
              Instant.ofEpochMilli(retainUntil));
      return new Row(
          record, rs.getString("owner_token"), leaseUntil, retainUntil, rs.getLong("db_now"));
    }
  }

  /** Builds a {@link JdbcKeyStore}. Setters validate at once. Not thread-safe. */
  public static final class Builder {
    private final Jdbi jdbi;
    private String tableName = DEFAULT_TABLE_NAME;
    private JdbcDialect dialect;
    private boolean createSchemaIfMissing;
    private boolean databaseTime;
    private Clock clock = Clock.systemUTC();
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;

    private Builder(Jdbi jdbi) {
      this.jdbi = jdbi;
    }

    /**
     * The table, a plain identifier optionally qualified by a schema ({@code
     * notifications.idempotency_records}). Default {@link #DEFAULT_TABLE_NAME}.
     *
     * @param tableName the table name
     * @return this builder
     * @throws IllegalArgumentException if it is not a plain identifier
     */
    public Builder tableName(String tableName) {
      this.tableName = Statements.requireTableName(tableName);
      return this;
    }

    /**
     * The SQL dialect. Default: detected from the connection's metadata.
     *
     * @param dialect the dialect
     * @return this builder
     */
    public Builder dialect(JdbcDialect dialect) {
      this.dialect = Objects.requireNonNull(dialect, "dialect must not be null");
      return this;
    }

    /**
     * Whether {@link #build()} creates the table and its index if they do not exist, with the
     * dialect's shipped DDL ({@link JdbcDialect#schemaResource()}). Default {@code false}.
     *
     * @param create {@code true} to create
     * @return this builder
     */
    public Builder createSchemaIfMissing(boolean create) {
      this.createSchemaIfMissing = create;
      return this;
    }

    /**
     * Whether leases and windows use the database's clock instead of each request's time (the
     * guard's clock). Turn it on when application hosts' clocks may disagree. Default {@code
     * false}.
     *
     * @param databaseTime {@code true} for database time
     * @return this builder
     */
    public Builder databaseTime(boolean databaseTime) {
      this.databaseTime = databaseTime;
      return this;
    }

    /**
     * The clock {@link #purgeExpired(int)} uses without database time. Default {@link
     * Clock#systemUTC()}.
     *
     * @param clock the clock
     * @return this builder
     */
    public Builder clock(Clock clock) {
      this.clock = Objects.requireNonNull(clock, "clock must not be null");
      return this;
    }

    /**
     * The largest stored result in bytes. Default {@link KeyStore#DEFAULT_MAX_PAYLOAD_BYTES}; keep
     * it below MySQL's {@code max_allowed_packet}.
     *
     * @param maxPayloadBytes at least 1
     * @return this builder
     */
    public Builder maxPayloadBytes(int maxPayloadBytes) {
      if (maxPayloadBytes < 1) {
        throw new IllegalArgumentException(
            "maxPayloadBytes must be at least 1, was " + maxPayloadBytes);
      }
      this.maxPayloadBytes = maxPayloadBytes;
      return this;
    }

    /**
     * The most one store operation may take on the database once it has a connection: every
     * statement gets this query timeout (rounded down to whole seconds, at least one), and the
     * connection's socket this network timeout while the operation runs (restored afterwards). A
     * database that stops answering then fails the claim with {@link KeyStoreException}, and
     * nothing is sent, instead of hanging the caller. Getting the connection is bounded by your
     * pool, not by this: set its timeout too (HikariCP {@code connectionTimeout}, for example 2
     * seconds), and the driver's connect timeout (PostgreSQL {@code connectTimeout}). Default
     * {@link #DEFAULT_OPERATION_TIMEOUT}.
     *
     * @param timeout at least 1 ms
     * @return this builder
     */
    public Builder operationTimeout(Duration timeout) {
      Objects.requireNonNull(timeout, "operationTimeout must not be null");
      if (timeout.toMillis() < 1) {
        throw new IllegalArgumentException(
            "operationTimeout must be at least 1 ms, was " + timeout);
      }
      this.operationTimeout = timeout;
      return this;
    }

    /**
     * Builds the store, detecting the dialect and creating the schema if asked.
     *
     * @return the store
     * @throws KeyStoreException if the database cannot be reached for that
     */
    public JdbcKeyStore build() {
      return new JdbcKeyStore(this);
    }
  }
}
