package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.JoinedTransaction;
import dev.idempotency.spi.KeyStore;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.jdbi.v3.core.JdbiException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The store's records inside the caller's transaction, on the caller's connection ({@link
 * JdbcKeyStore#joining(Connection)}). A claim:
 *
 * <ol>
 *   <li>reads the session's lock wait and sets it to what is left of the call's wait ({@code SET
 *       LOCAL lock_timeout} on PostgreSQL through {@code set_config}, InnoDB's session {@code
 *       innodb_lock_wait_timeout} in whole seconds, H2's {@code LOCK_TIMEOUT});
 *   <li>inserts the key's row if absent: while another transaction holds an uncommitted row of the
 *       key, the insert waits on the database's lock until that transaction ends;
 *   <li>otherwise reads the latest committed row (a locking read on MySQL, whose repeatable read
 *       would show the transaction's older snapshot) and decides as the usual claim does;
 *   <li>restores the session's lock wait;
 *   <li>marks the transaction that holds a new claim (its id, or a savepoint on MySQL), so that the
 *       outcome's write finds out whether the sender committed or rolled it back, and then writes
 *       nothing ({@link #complete} is false).
 * </ol>
 *
 * A lock wait that runs out is an empty result (the guard's 409); a deadlock or serialization
 * failure is thrown, never retried: the database rolled back the statement or the whole
 * transaction, and only the caller can run its transaction again. Not thread-safe.
 */
final class JdbcJoinedTransaction implements JoinedTransaction {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);
  private static final int MAX_ROUNDS = 16;
  private static final Duration MAX_CANCEL_GRACE = Duration.ofSeconds(1);

  /** The statements of joined transactions, prepared once per store. */
  record JoinedStatements(
      Statements sql,
      JdbcClaims claims,
      PlainStatement readLockWait,
      PlainStatement setLockWait,
      PlainStatement selectLatest,
      PlainStatement complete,
      PlainStatement release,
      PlainStatement transactionId) {

    static JoinedStatements of(Statements sql, JdbcClaims claims) {
      return new JoinedStatements(
          sql,
          claims,
          new PlainStatement(sql.readLockWait()),
          new PlainStatement(sql.setLockWait()),
          new PlainStatement(sql.selectLatest()),
          new PlainStatement(sql.completeInTransaction),
          new PlainStatement(sql.release),
          sql.transactionId() == null ? null : new PlainStatement(sql.transactionId()));
    }
  }

  private final JdbcKeyStore store;
  private final Connection connection;
  private final JoinedStatements statements;
  private final StatementWatchdog watchdog;

  /**
   * How long past the call's wait a claim's statement may still run before it is cancelled: a
   * statement that is slow rather than waiting on a lock is not cut at a short wait.
   */
  private final Duration cancelGrace;

  /**
   * What each claim of this transaction saw of it, by owner token: see {@link #sameTransaction}.
   */
  private final Map<String, Object> marks = new HashMap<>();

  JdbcJoinedTransaction(
      JdbcKeyStore store,
      Connection connection,
      JoinedStatements statements,
      Duration operationTimeout) {
    this.store = store;
    this.connection = connection;
    this.statements = statements;
    this.watchdog = new StatementWatchdog(operationTimeout);
    this.cancelGrace =
        operationTimeout.compareTo(MAX_CANCEL_GRACE) < 0 ? operationTimeout : MAX_CANCEL_GRACE;
  }

  @Override
  public KeyStore store() {
    return store;
  }

  @Override
  public Optional<ClaimResult> claim(ClaimRequest request, Duration lockWait) {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(lockWait, "lockWait");
    JdbcKeyStore.requireOpenTransaction(connection);
    long deadline = System.nanoTime() + lockWait.toNanos();
    String previous = null;
    try {
      previous =
          statements
              .readLockWait()
              .query(
                  connection,
                  watchdog,
                  name -> null,
                  rows -> {
                    rows.next();
                    return rows.getString(1);
                  });
      ClaimResult result = claimWithin(deadline, request);
      if (result instanceof ClaimResult.Claimed) {
        marks.put(request.ownerToken(), markTransaction());
      }
      return Optional.of(result);
    } catch (JdbiException e) {
      SQLException cause = SqlExecutor.findSqlException(e);
      if (cause != null
          && (statements.sql().isLockWaitTimeout(cause)
              || (statements.sql().isCancelled(cause) && System.nanoTime() - deadline >= 0))) {
        return Optional.empty();
      }
      throw failure("claim", e);
    } finally {
      if (previous != null) {
        restore(previous);
      }
    }
  }

  /**
   * The claim itself. Each round sets the lock wait to what is left of the call's, and its
   * statements are cancelled when that has run out (plus at most a second of grace): a lock wait
   * restarts for each transaction that holds the key in turn (PostgreSQL's within one statement),
   * and only the deadline bounds the whole. A lock wait that runs out is thrown, as the database
   * reports it.
   */
  private ClaimResult claimWithin(long deadline, ClaimRequest request) {
    for (int round = 0; round < MAX_ROUNDS; round++) {
      long left = Math.max(deadline - System.nanoTime(), 1_000_000L);
      Object value = statements.sql().lockWaitValue(Duration.ofNanos(left));
      statements.setLockWait().execute(connection, watchdog, name -> value);
      StatementWatchdog waiting = new StatementWatchdog(Duration.ofNanos(left).plus(cancelGrace));
      if (statements.sql().insertClaim(connection, waiting, request)) {
        return new ClaimResult.Claimed(1, false);
      }
      Optional<Rows.Row> row =
          statements
              .selectLatest()
              .query(
                  connection,
                  waiting,
                  name ->
                      switch (name) {
                        case "keyId" -> request.keyId();
                        case "now" -> request.now().toEpochMilli();
                        default -> throw new IllegalArgumentException("no parameter " + name);
                      },
                  rows ->
                      rows.next() ? Optional.of(Rows.Row.read(rows)) : Optional.<Rows.Row>empty());
      if (row.isEmpty()) {
        // the holder rolled back (or the row was forgotten) after the insert gave way: again
        continue;
      }
      ClaimResult result = statements.claims().decide(connection, request, row.get(), null);
      if (result != null) {
        return result;
      }
    }
    throw new KeyStoreException(
        "JDBC store: the claim of key "
            + request.keyId()
            + " in the caller's transaction lost "
            + MAX_ROUNDS
            + " races in a row",
        null);
  }

  /**
   * Marks the transaction that holds a new claim: its id where the database tells it, else a
   * savepoint (MySQL, whose transaction ids need the PROCESS privilege to read).
   */
  private Object markTransaction() {
    if (statements.transactionId() == null) {
      try {
        return connection.setSavepoint();
      } catch (SQLException e) {
        throw new KeyStoreException(
            "JDBC store could not set a savepoint in the caller's transaction (SQLState "
                + e.getSQLState()
                + "); roll the transaction back",
            e);
      }
    }
    return String.valueOf(readTransactionId());
  }

  /**
   * Whether the transaction that made a claim is still the open one: a sender that committed (or
   * rolled back) the caller's transaction ended it, and its claim with it.
   */
  private boolean sameTransaction(Object mark) {
    if (mark instanceof Savepoint savepoint) {
      try {
        // the savepoint ended with its transaction: releasing it then fails
        connection.releaseSavepoint(savepoint);
        return true;
      } catch (SQLException e) {
        log.debug("The caller's transaction ended inside the sender", e);
        return false;
      }
    }
    return mark.equals(String.valueOf(readTransactionId()));
  }

  private String readTransactionId() {
    return statements
        .transactionId()
        .query(
            connection,
            watchdog,
            name -> null,
            rows -> {
              rows.next();
              return rows.getString(1);
            });
  }

  private void restore(String previous) {
    try {
      Object value = statements.sql().restoredLockWait(previous);
      statements.setLockWait().execute(connection, watchdog, name -> value);
    } catch (RuntimeException e) {
      // PostgreSQL refuses every statement of a failed transaction; its SET LOCAL ends with it
      log.debug("Could not restore the session's lock wait (the transaction failed)", e);
    }
  }

  @Override
  public boolean complete(CompleteRequest request) {
    Objects.requireNonNull(request, "request");
    request.requirePayloadAtMost(store.maxPayloadBytes());
    try {
      Object mark = marks.remove(request.ownerToken());
      if (mark != null && !sameTransaction(mark)) {
        return false;
      }
      return statements.complete().update(connection, watchdog, JdbcWrites.values(request)) == 1;
    } catch (JdbiException e) {
      throw failure("record the outcome of", e);
    }
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
    marks.remove(ownerToken);
    try {
      return statements
              .release()
              .update(
                  connection,
                  watchdog,
                  name ->
                      switch (name) {
                        case "keyId" -> keyId;
                        case "ownerToken" -> ownerToken;
                        default -> throw new IllegalArgumentException("no parameter " + name);
                      })
          == 1;
    } catch (JdbiException e) {
      throw failure("release", e);
    }
  }

  private KeyStoreException failure(String operation, JdbiException e) {
    if (SqlExecutor.isTransient(e)) {
      return new KeyStoreException(
          "JDBC store: the database chose the caller's transaction as a deadlock or serialization"
              + " victim while it tried to "
              + operation
              + " a key on "
              + store.tableName()
              + SqlExecutor.describe(e)
              + "; nothing was sent and the key is not claimed: roll the transaction back and run"
              + " it again",
          e);
    }
    return new KeyStoreException(
        "JDBC store failed to "
            + operation
            + " a key on "
            + store.tableName()
            + " in the caller's transaction"
            + SqlExecutor.describe(e)
            + "; roll the transaction back",
        e);
  }
}
