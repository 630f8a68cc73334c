package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.CompleteRequest;
import dev.idempotency.spi.JoinedTransaction;
import dev.idempotency.spi.KeyStore;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
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
 *   <li>reads the session's lock wait and sets it to the call's wait ({@code SET LOCAL
 *       lock_timeout} on PostgreSQL through {@code set_config}, InnoDB's session {@code
 *       innodb_lock_wait_timeout} in whole seconds, H2's {@code LOCK_TIMEOUT});
 *   <li>inserts the key's row if absent: while another transaction holds an uncommitted row of the
 *       key, the insert waits on the database's lock until that transaction ends;
 *   <li>otherwise reads the latest committed row (a locking read on MySQL, whose repeatable read
 *       would show the transaction's older snapshot) and decides as the usual claim does;
 *   <li>restores the session's lock wait.
 * </ol>
 *
 * A lock wait that runs out is an empty result (the guard's 409); a deadlock or serialization
 * failure is thrown, never retried: the database rolled back the statement or the whole
 * transaction, and only the caller can run its transaction again. Not thread-safe.
 */
final class JdbcJoinedTransaction implements JoinedTransaction {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);
  private static final int MAX_ROUNDS = 16;

  /** The statements of joined transactions, prepared once per store. */
  record JoinedStatements(
      Statements sql,
      JdbcClaims claims,
      PlainStatement readLockWait,
      PlainStatement setLockWait,
      PlainStatement selectLatest,
      PlainStatement complete,
      PlainStatement release) {

    static JoinedStatements of(Statements sql, JdbcClaims claims) {
      return new JoinedStatements(
          sql,
          claims,
          new PlainStatement(sql.readLockWait()),
          new PlainStatement(sql.setLockWait()),
          new PlainStatement(sql.selectLatest()),
          new PlainStatement(sql.completeInTransaction),
          new PlainStatement(sql.release));
    }
  }

  private final JdbcKeyStore store;
  private final Connection connection;
  private final JoinedStatements statements;
  private final Duration operationTimeout;
  private final StatementWatchdog watchdog;

  JdbcJoinedTransaction(
      JdbcKeyStore store,
      Connection connection,
      JoinedStatements statements,
      Duration operationTimeout) {
    this.store = store;
    this.connection = connection;
    this.statements = statements;
    this.operationTimeout = operationTimeout;
    this.watchdog = new StatementWatchdog(operationTimeout);
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
    // the statements may wait on a lock for lockWait: cancel them only well past it
    StatementWatchdog waiting = new StatementWatchdog(operationTimeout.plus(lockWait));
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
      Object value = statements.sql().lockWaitValue(lockWait);
      statements.setLockWait().execute(connection, watchdog, name -> value);
      return Optional.of(claimWithin(waiting, request));
    } catch (JdbiException e) {
      SQLException cause = SqlExecutor.findSqlException(e);
      if (cause != null && statements.sql().isLockWaitTimeout(cause)) {
        return Optional.empty();
      }
      throw failure("claim", e);
    } finally {
      if (previous != null) {
        restore(previous);
      }
    }
  }

  /** The claim itself; a lock wait that runs out is thrown, as the database reports it. */
  private ClaimResult claimWithin(StatementWatchdog waiting, ClaimRequest request) {
    for (int round = 0; round < MAX_ROUNDS; round++) {
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
      ClaimResult result = statements.claims().decide(connection, request, row.get());
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
      return statements.complete().update(connection, watchdog, JdbcWrites.values(request)) == 1;
    } catch (JdbiException e) {
      throw failure("record the outcome of", e);
    }
  }

  @Override
  public boolean release(String keyId, String ownerToken) {
    Objects.requireNonNull(keyId, "keyId");
    Objects.requireNonNull(ownerToken, "ownerToken");
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
