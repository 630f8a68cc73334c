package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.ExtendRequest;
import dev.idempotency.spi.JoinedTransaction;
import dev.idempotency.spi.KeyStore;
import dev.idempotency.spi.StoredRecord;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import javax.sql.DataSource;
import org.jdbi.v3.core.Jdbi;
import org.jspecify.annotations.Nullable;
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
 *   <li>A <b>take-back</b> of a claim nothing was sent under ({@link #takeBack}) deletes a first
 *       attempt, or else ends a takeover's lease now, keeping its attempt: two statements at most.
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
 * <p><b>Purge.</b> Rows past their window count as absent at once; {@link #purger()} deletes them
 * in bounded batches, once or on a schedule.
 *
 * <p>Thread-safe. Failures of the database become {@link KeyStoreException} with the SQLState,
 * never with a key in clear.
 *
 * <p><b>Where things live.</b> This class is the facade and its builder. The SQL is in {@code
 * Statements}, one subclass per database ({@code PostgresStatements}, {@code MySqlStatements},
 * {@code H2Statements}); the single-key claim in {@code JdbcClaims}, the batch claim in {@code
 * JdbcBatchClaims}, complete/release/extend in {@code JdbcWrites}, the purge in {@link JdbcPurger};
 * timeouts, retries and SQLState mapping in {@code SqlExecutor}, row mapping in {@code Rows}.
 */
public final class JdbcKeyStore implements KeyStore {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);

  /** The default table name. */
  public static final String DEFAULT_TABLE_NAME = "idempotency_records";

  /** The default bound on one store operation's statements: 5 seconds. */
  public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(5);

  /** The default bound on the wait for a pooled connection: 2 seconds. */
  public static final Duration DEFAULT_CONNECTION_WAIT = Duration.ofSeconds(2);

  /** The largest batch: 500 keys, which keeps a multi-row statement under every driver's limits. */
  private static final int MAX_BATCH = 500;

  private final String tableName;
  private final boolean databaseTime;
  private final boolean synchronousOutcomes;
  private final boolean createSchemaIfMissing;
  private final int maxPayloadBytes;
  private final @Nullable JdbcDialect configuredDialect;
  private final SqlExecutor executor;
  private final Duration operationTimeout;
  private final @Nullable DataSource dataSource;
  private volatile @Nullable Prepared prepared;

  /**
   * What depends on the database's dialect, built once the database first answers: the store is
   * built without touching the database, so that a service whose database is down at deploy time
   * still starts.
   */
  private record Prepared(
      JdbcDialect dialect,
      Statements sql,
      JdbcClaims claims,
      JdbcBatchClaims batchClaims,
      JdbcWrites writes,
      JdbcJoinedTransaction.JoinedStatements joined) {}

  private JdbcKeyStore(Builder builder) {
    this.tableName = builder.tableName;
    this.databaseTime = builder.databaseTime;
    this.synchronousOutcomes = builder.synchronousOutcomes;
    this.createSchemaIfMissing = builder.createSchemaIfMissing;
    this.maxPayloadBytes = builder.maxPayloadBytes;
    this.configuredDialect = builder.dialect;
    this.executor = new SqlExecutor(builder.jdbi, builder.dataSource, tableName, builder);
    this.operationTimeout = builder.operationTimeout;
    this.dataSource = builder.dataSource;
  }

  /**
   * The dialect's parts, prepared on first use: the dialect read from the connection's metadata
   * (unless configured), and the schema created if asked. While the database cannot be reached this
   * fails with {@link KeyStoreException}, and the next operation tries again.
   */
  private Prepared prepared() {
    Prepared ready = prepared;
    if (ready != null) {
      return ready;
    }
    synchronized (this) {
      if (prepared == null) {
        JdbcDialect dialect =
            configuredDialect != null ? configuredDialect : executor.detectDialect();
        Statements sql = dialect.statements(tableName, databaseTime, synchronousOutcomes);
        if (createSchemaIfMissing) {
          String script = schemaSql(dialect, tableName);
          executor.call(
              "create schema",
              handle -> {
                handle.createScript(script).execute();
                return null;
              });
        }
        if (dialect == JdbcDialect.H2) {
          executor.boundLockWaits(sql); // H2 does not end a lock wait on a cancel
        }
        JdbcClaims claims = new JdbcClaims(sql, executor.watchdog());
        prepared =
            new Prepared(
                dialect,
                sql,
                claims,
                new JdbcBatchClaims(sql, claims, executor.watchdog(), MAX_BATCH),
                new JdbcWrites(sql, executor.watchdog()),
                JdbcJoinedTransaction.JoinedStatements.of(sql, claims));
        warmUpRenewals(prepared.writes());
      }
      return prepared;
    }
  }

  /** A key id no digest can be (digests are 43 characters of base64url): the warm-up's. */
  private static final String WARM_UP_KEY_ID = "idempotency:warm-up";

  /**
   * Renews no lease once, by a key no row has, so that the lease keeper's first batch renewal in a
   * fresh process does not pay for loading and preparing that path: on a loaded host that cost can
   * approach a short lease. A failure is ignored (the renewal path then warms on first real use).
   */
  private void warmUpRenewals(JdbcWrites writes) {
    try {
      executor.call(
          "warm up renewals",
          handle ->
              writes.extendAll(
                  handle,
                  List.of(
                      new ExtendRequest(
                          WARM_UP_KEY_ID, "warm-up", Duration.ofSeconds(1), Instant.EPOCH))));
    } catch (RuntimeException e) {
      log.debug("Could not warm up the batch renewal path; it warms on first use", e);
    }
  }

  /**
   * Connects (if the store has not yet) and checks that the table can be read: for a start-up
   * check. Creates it first if the store was built with {@code createSchemaIfMissing(true)}.
   *
   * @return {@code true} if the table exists and can be read; {@code false} if the database answers
   *     that it does not (or cannot be read by this user)
   * @throws KeyStoreException if the database cannot be reached
   */
  public boolean tableExists() {
    Prepared ready = prepared();
    return executor.tableReadable(ready.sql().probeTable);
  }

  /**
   * Starts a builder on a {@link DataSource}, ideally a connection pool. The store's single-key
   * operations (claim, complete, release, extend) borrow their connections from it directly and run
   * plain JDBC statements; batches, purges and the schema go through Jdbi.
   *
   * @param dataSource the database
   * @return a new builder
   */
  public static Builder builder(DataSource dataSource) {
    Objects.requireNonNull(dataSource, "dataSource must not be null");
    return new Builder(Jdbi.create(dataSource), dataSource);
  }

  /**
   * Starts a builder on an existing {@link Jdbi}. Every operation borrows its connection through it
   * (a Jdbi handle per operation), which costs more client CPU per operation than a store built on
   * the {@link #builder(DataSource) DataSource} underneath; the statements are the same.
   *
   * @param jdbi the Jdbi instance
   * @return a new builder
   */
  public static Builder builder(Jdbi jdbi) {
    return new Builder(Objects.requireNonNull(jdbi, "jdbi must not be null"), null);
  }

  /**
   * The DDL this store runs for {@code createSchemaIfMissing}, for a dialect and a table name: the
   * dialect's {@linkplain JdbcDialect#schemaResource() template} with its placeholders filled.
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
    JdbcClaims claims = prepared().claims();
    return executor.callPlain("claim", connection -> claims.claim(connection, request));
  }

  /**
   * Claims a batch in few statements. On PostgreSQL one insert-if-absent of every key that reports
   * what it inserted, and one select of the keys it did not (a batch of new keys costs one
   * statement, a replayed one two); on MySQL and MariaDB one select of the keys, and for the absent
   * ones one multi-row insert and one select again (three and one). On H2, which runs in-process,
   * and for requests that do not share one time, lease and window, key by key.
   *
   * <p>The statements commit one by one. If the batch then fails (a statement ran past the
   * operation's deadline on a locked row, the database failed), the rows it had inserted or
   * reclaimed are deleted and the leases it had taken over given back, each fenced by its owner
   * token, before the {@link KeyStoreException} is thrown: a failed batch leaves no key held. That
   * costs one more round trip per kind of write taken back, and only when the batch fails.
   */
  @Override
  public List<ClaimResult> claimAll(List<ClaimRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    if (requests.size() > MAX_BATCH) {
      throw new IllegalArgumentException(
          "claimAll takes at most " + MAX_BATCH + " requests, was " + requests.size());
    }
    JdbcBatchClaims batchClaims = prepared().batchClaims();
    if (!batchClaims.applies(requests)) {
      return KeyStore.super.claimAll(requests);
    }
    return executor.call("claim a batch", handle -> batchClaims.claimAll(handle, requests));
  }

  @Override
  public boolean complete(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    request.requirePayloadAtMost(maxPayloadBytes);
    JdbcWrites writes = prepared().writes();
    return executor.callPlain("complete", connection -> writes.complete(connection, request));
  }

  /**
   * Writes a batch of outcomes, each fenced by its owner token: on PostgreSQL one statement for a
   * batch of distinct keys, elsewhere one JDBC batch of the fenced update (one round trip).
   */
  @Override
  public List<Boolean> completeAll(List<CompleteRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    for (CompleteRequest request : requests) {
      request.requirePayloadAtMost(maxPayloadBytes);
    }
    JdbcWrites writes = prepared().writes();
    return executor.call("complete a batch", handle -> writes.completeAll(handle, requests));
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    JdbcWrites writes = prepared().writes();
    return executor.callPlain(
        "release", connection -> writes.release(connection, keyId, ownerToken));
  }

  /**
   * Deletes a first attempt; a takeover keeps its attempt and its lease ends now (on the database's
   * clock with {@code databaseTime}). Two fenced statements on one connection.
   */
  @Override
  public boolean takeBack(String keyId, String ownerToken, Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    Objects.requireNonNull(now, "now");
    JdbcWrites writes = prepared().writes();
    return executor.callPlain(
        "take back", connection -> writes.takeBack(connection, keyId, ownerToken, now));
  }

  @Override
  public boolean extend(ExtendRequest request) {
    Objects.requireNonNull(request, "request");
    JdbcWrites writes = prepared().writes();
    return executor.callPlain("extend", connection -> writes.extend(connection, request));
  }

  /**
   * Renews a batch of leases, each fenced by its owner token: on PostgreSQL one statement for a
   * batch of distinct keys, elsewhere one JDBC batch of the fenced update (one round trip).
   */
  @Override
  public List<Boolean> extendAll(List<ExtendRequest> requests) {
    if (requests.isEmpty()) {
      return List.of();
    }
    JdbcWrites writes = prepared().writes();
    return executor.call("extend a batch", handle -> writes.extendAll(handle, requests));
  }

  /**
   * This store's records inside the caller's open transaction on {@code connection}, for {@link
   * dev.idempotency.IdempotencyGuard#executeInTransaction}: the claim, what the sender writes
   * through the same connection and the outcome then commit or roll back together. For plain JDBC,
   * jOOQ and Jdbi, which all hand out the transaction's connection:
   *
   * <pre>{@code
   * try (Connection connection = dataSource.getConnection()) {
   *   connection.setAutoCommit(false);
   *   String rowId = guard.executeInTransaction(store.joining(connection), key, ttl,
   *       ctx -> outbox.insert(connection, phone, text));
   *   connection.commit();
   * }
   * // Jdbi: jdbi.inTransaction(handle -> guard.executeInTransaction(
   * //     store.joining(handle.getConnection()), key, ttl, ctx -> insert(handle)));
   * }</pre>
   *
   * <p>The connection must reach the database and table of this store, and this is the caller's
   * responsibility: the store does not check it. A connection to another database that has a table
   * of the same name is accepted, and the record then commits there, where the usual mode, {@code
   * find} and {@code forget} never look, so the next usual-mode call of the key sends again. (A
   * JDBC URL or user names no database reliably: pools, proxies and host aliases reach one database
   * under many URLs, and one URL may reach another schema through the search path.)
   *
   * <p>The claim is an insert of the key's row: uncommitted, it is visible to no other transaction;
   * a concurrent claim of the key waits on its lock until this transaction ends, at most the
   * guard's {@code inFlightWait} (set per claim as the database's lock timeout: PostgreSQL's {@code
   * lock_timeout} for the transaction, MySQL/MariaDB's {@code innodb_lock_wait_timeout} in whole
   * seconds rounded up, H2's {@code LOCK_TIMEOUT}, each restored after the claim). On PostgreSQL a
   * lock wait that ran out aborts the transaction; on every database, roll back after the guard
   * threw. The guard's statements run on the caller's connection under this store's operation
   * timeout (the claim's waiting statements under what is left of the lock wait, plus at most a
   * second); the store never commits, rolls back or closes it, and neither may the sender: a sender
   * that commits or rolls back the transaction makes the call fail (after a commit the outcome is
   * recorded outside the transaction, so that a repeat replays it).
   *
   * @param connection a connection with an open transaction (auto-commit off)
   * @return the joined transaction, for this connection's current transaction only
   * @throws IllegalStateException if the connection is in auto-commit mode (no transaction to join)
   * @throws KeyStoreException if the connection cannot be read, or the store's dialect cannot be
   *     prepared
   */
  public JoinedTransaction joining(Connection connection) {
    Objects.requireNonNull(connection, "connection must not be null");
    requireOpenTransaction(connection);
    return new JdbcJoinedTransaction(this, connection, prepared().joined(), operationTimeout);
  }

  /** Refuses a connection in auto-commit mode: it has no transaction to join. */
  static void requireOpenTransaction(Connection connection) {
    boolean autoCommit;
    try {
      autoCommit = connection.getAutoCommit();
    } catch (SQLException e) {
      throw new KeyStoreException(
          "JDBC store could not read the connection's auto-commit mode (SQLState "
              + e.getSQLState()
              + ")",
          e);
    }
    if (autoCommit) {
      throw new IllegalStateException(
          "the connection is in auto-commit mode: there is no transaction to join (call"
              + " setAutoCommit(false), or run inside the application's transaction); a claim"
              + " committed on its own would be a claim without a lease");
    }
  }

  /**
   * The {@link DataSource} this store was built on: integrations check that a transaction to join
   * is on it.
   *
   * @return the data source, or empty for a store built on a {@link Jdbi}
   */
  public Optional<DataSource> dataSource() {
    return Optional.ofNullable(dataSource);
  }

  /** Reads the row with one statement; a row past its window counts as absent. */
  @Override
  public Optional<StoredRecord> find(String keyId, Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(now, "now");
    Statements sql = prepared().sql();
    return executor.callPlain(
        "find",
        connection ->
            sql.selectRow(connection, executor.watchdog(), keyId, now)
                .filter(row -> !row.pastWindow())
                .map(Rows.Row::record));
  }

  /** Deletes a settled row with one conditional statement; never one in progress. */
  @Override
  public boolean delete(String keyId, Instant now) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(now, "now");
    JdbcWrites writes = prepared().writes();
    return executor.callPlain("forget", connection -> writes.deleteSettled(connection, keyId, now));
  }

  /** 500 keys, which keeps a multi-row statement under every driver's limits. */
  @Override
  public int maxBatchSize() {
    return MAX_BATCH;
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
   * A purger of this store's rows past their window, deciding which on the system clock unless the
   * store uses the database's.
   *
   * @return a purger
   */
  public JdbcPurger purger() {
    return purger(Clock.systemUTC());
  }

  /**
   * A purger of this store's rows past their window, deciding which on {@code clock} unless the
   * store uses the database's (tests pass the guard's clock).
   *
   * @param clock the clock
   * @return a purger
   */
  public JdbcPurger purger(Clock clock) {
    return new JdbcPurger(executor, () -> prepared().sql(), databaseTime, tableName, clock);
  }

  /**
   * The dialect in use: the configured one, or the one read from the database (which connects, if
   * the store has not yet).
   *
   * @return the dialect
   * @throws KeyStoreException if it must be read and the database cannot be reached
   */
  public JdbcDialect dialect() {
    return configuredDialect != null ? configuredDialect : prepared().dialect();
  }

  /**
   * The table in use.
   *
   * @return the table name as configured
   */
  public String tableName() {
    return tableName;
  }

  /** Builds a {@link JdbcKeyStore}. Setters validate at once. Not thread-safe. */
  public static final class Builder {
    private final Jdbi jdbi;
    private final @Nullable DataSource dataSource;
    private String tableName = DEFAULT_TABLE_NAME;
    private JdbcDialect dialect;
    private boolean createSchemaIfMissing;
    private boolean databaseTime;
    private boolean synchronousOutcomes;
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;
    Duration connectionWait = DEFAULT_CONNECTION_WAIT;

    private Builder(Jdbi jdbi, @Nullable DataSource dataSource) {
      this.jdbi = jdbi;
      this.dataSource = dataSource;
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
     * Whether writing an outcome waits for the database to flush it to disk, as a claim always
     * does. Default {@code false}: on PostgreSQL the completion commits with {@code
     * synchronous_commit} off for its own transaction, which saves a disk flush per first send
     * (measured in BENCHMARKS.md). The claim is unaffected: it is flushed before the sender runs.
     * What this gives up: if the database server itself crashes within a moment (about three {@code
     * wal_writer_delay}s, 600 ms by default) of a completion, that completion can be lost, and the
     * key is left in progress, as if the process had crashed after its send: a repeat waits out the
     * lease and sends again with the same provider key (or, in strict mode, gets {@code
     * IdempotencyOutcomeUnknownException}). A process crash, or a crash of the client host, loses
     * nothing more than before. Other dialects always wait for the flush.
     *
     * @param synchronous {@code true} to flush every outcome before returning
     * @return this builder
     */
    public Builder synchronousOutcomes(boolean synchronous) {
      this.synchronousOutcomes = synchronous;
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
     * The most one store operation may take on the database once it has a connection: one deadline
     * from the operation's first statement, shared by all its statements; a statement still running
     * when it passes is cancelled (within a further 0.1 s; the connection stays usable). A claim
     * whose insert was cancelled at the deadline then gets at least 0.1 s more for one plain read
     * that tells a key held by an open joined transaction (in flight) from a store failure. The
     * connection's socket gets a network timeout half a second longer than this while the operation
     * runs (restored afterwards), for a database that no longer answers at all. Either way the
     * operation fails with {@link KeyStoreException}, and a claim sends nothing, instead of hanging
     * the caller. The wait for a connection is bounded separately, by {@link
     * #connectionWait(Duration)}. Default {@link #DEFAULT_OPERATION_TIMEOUT}.
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
     * The most an operation waits for a connection from the pool (a store built on a {@link
     * DataSource}): past it the operation fails with {@link KeyStoreException} and nothing is sent,
     * whatever the pool's own timeout (HikariCP waits 30 s by default, which would hold every call
     * that long while the database is down or the pool exhausted). The caller's thread is never
     * interrupted: a HikariCP pool is asked with this wait as its own bound (its failure names what
     * it last saw, such as a refused connection); any other pool is asked on a thread of the
     * store's, and a connection that arrives after the caller gave up goes back to the pool. A
     * store built on a {@link Jdbi} leaves the wait to Jdbi's connection factory. Default {@link
     * #DEFAULT_CONNECTION_WAIT}.
     *
     * @param wait at least 1 ms
     * @return this builder
     */
    public Builder connectionWait(Duration wait) {
      Objects.requireNonNull(wait, "connectionWait must not be null");
      if (wait.toMillis() < 1) {
        throw new IllegalArgumentException("connectionWait must be at least 1 ms, was " + wait);
      }
      this.connectionWait = wait;
      return this;
    }

    /**
     * Builds the store, without touching the database, so that a service whose database is down
     * when it starts still starts. The first operation borrows a connection to read the database's
     * product name (unless {@link #dialect(JdbcDialect)} was set) and runs the dialect's DDL
     * ({@code CREATE TABLE IF NOT EXISTS}, {@code CREATE INDEX IF NOT EXISTS}) if {@link
     * #createSchemaIfMissing(boolean)} asked for it; until the database answers, each operation
     * fails with {@link KeyStoreException} (nothing is sent). No connection is kept. Call {@link
     * JdbcKeyStore#tableExists()} to check the table at start-up.
     *
     * @return the store
     */
    public JdbcKeyStore build() {
      return new JdbcKeyStore(this);
    }
  }
}
