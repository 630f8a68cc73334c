package dev.idempotency.jdbc;

import dev.idempotency.KeyStoreException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import dev.idempotency.spi.RecordState;
import dev.idempotency.spi.StoredRecord;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import org.jdbi.v3.core.JdbiException;
import org.jspecify.annotations.Nullable;

/**
 * The single-key claim: insert the row if the key is absent, else read it; then reclaim a row past
 * its window, or take over an expired lease, by a compare-and-set on the owner token it saw.
 *
 * <p>A first send costs one statement; a replay two (one on PostgreSQL); a reclaim or a takeover
 * one more. A row that changes between the read and the compare-and-set lost a race, and the claim
 * starts over, at most {@value #MAX_ROUNDS} times.
 */
final class JdbcClaims {

  private static final int MAX_ROUNDS = 16;

  /**
   * What the plain read after a cancelled insert gets when the operation's deadline has passed: a
   * read by primary key that waits on no row lock takes a millisecond or two.
   */
  static final Duration READ_AFTER_CANCEL = Duration.ofMillis(100);

  private final Statements sql;
  private final StatementWatchdog watchdog;
  private final PlainStatement reclaimExpired;
  private final PlainStatement takeOver;

  JdbcClaims(Statements sql, StatementWatchdog watchdog) {
    this.sql = sql;
    this.watchdog = watchdog;
    this.reclaimExpired = new PlainStatement(sql.reclaimExpired);
    this.takeOver = new PlainStatement(sql.takeOver);
  }

  ClaimResult claim(Connection connection, ClaimRequest request) {
    return claim(connection, request, null);
  }

  /**
   * {@link #claim(Connection, ClaimRequest)}, for a key of a batch: what it writes is recorded in
   * {@code undo} (if not null), to be taken back if the batch fails.
   */
  ClaimResult claim(Connection connection, ClaimRequest request, @Nullable BatchClaimUndo undo) {
    for (int round = 0; round < MAX_ROUNDS; round++) {
      Rows.InsertOrRow seen;
      try {
        seen = sql.insertOrRead(connection, watchdog, request);
      } catch (JdbiException e) {
        ClaimResult held = heldByATransaction(connection, request, e);
        if (held == null) {
          throw e;
        }
        return held;
      }
      if (seen.inserted()) {
        if (undo != null) {
          undo.inserted(request);
        }
        return new ClaimResult.Claimed(1, false);
      }
      Optional<Rows.Row> row = seen.row();
      if (row.isEmpty()) {
        // released or purged since the insert, or (PostgreSQL) inserted by a transaction that
        // committed after this statement's snapshot began: try again
        continue;
      }
      ClaimResult result = decide(connection, request, row.get(), undo);
      if (result != null) {
        return result;
      }
    }
    throw new KeyStoreException(
        "JDBC store: the claim of key "
            + request.keyId()
            + " lost "
            + MAX_ROUNDS
            + " races in a row",
        null);
  }

  /**
   * The claim's insert waited on a lock until it timed out or was cancelled: another transaction
   * holds the key, an application's transaction that joined it ({@link JdbcJoinedTransaction}) and
   * is still open. That is a key in flight (the caller waits, then gets its 409), not a store
   * failure: a plain read, which waits on no lock, tells them apart. No committed row means an
   * uncommitted insert holds the key: it is reported in progress as this request would have claimed
   * it (a committed row past its window, which the transaction is reclaiming, too). A live
   * committed row is reported as it is: in progress, or settled and replayed. A read that fails too
   * (the database stalled, or a lock on the whole table) leaves the original failure to be thrown.
   * The read shares the operation's deadline; when the insert used it up (cancelled at the
   * timeout), the read gets {@link #READ_AFTER_CANCEL}, so the claim ends at most that much (plus
   * one sweep of the watchdog) after the operation timeout, not a second timeout later.
   *
   * @return the result, or null if the failure was not a lock wait
   */
  private ClaimResult heldByATransaction(
      Connection connection, ClaimRequest request, JdbiException failure) {
    SQLException cause = SqlExecutor.findSqlException(failure);
    if (cause == null || !(sql.isLockWaitTimeout(cause) || sql.isCancelled(cause))) {
      return null;
    }
    Optional<Rows.Row> committed;
    watchdog.allowAtLeast(READ_AFTER_CANCEL);
    try {
      committed = sql.selectRow(connection, watchdog, request.keyId(), request.now());
    } catch (JdbiException readFailed) {
      failure.addSuppressed(readFailed);
      return null;
    }
    if (committed.isPresent() && !committed.get().pastWindow()) {
      return new ClaimResult.Existing(committed.get().record(), false);
    }
    Instant now = request.now();
    return new ClaimResult.Existing(
        new StoredRecord(
            RecordState.IN_PROGRESS,
            1,
            request.fingerprint(),
            null,
            now,
            null,
            now.plus(request.lease()),
            now.plus(request.retention())),
        false);
  }

  /**
   * The outcome for a row that exists: reclaimed if past its window, taken over if its lease
   * expired and the request allows it, else the row as it is; null if the row changed under us.
   * What it writes is recorded in {@code undo}, if not null.
   */
  ClaimResult decide(
      Connection connection, ClaimRequest request, Rows.Row row, @Nullable BatchClaimUndo undo) {
    StoredRecord record = row.record();
    PlainStatement.Values claim = Statements.claimParameters(request);
    PlainStatement.Values seen =
        name ->
            switch (name) {
              case "seenToken" -> row.ownerToken();
              case "seenState" -> record.state().name();
              default -> claim.value(name);
            };
    if (row.pastWindow()) {
      if (reclaimExpired.update(connection, watchdog, seen) != 1) {
        return null;
      }
      if (undo != null) {
        undo.inserted(request);
      }
      return new ClaimResult.Claimed(1, false);
    }
    if (row.leaseExpired()
        && request.takeOverExpiredLease()
        && record.fingerprint().equals(request.fingerprint())) {
      if (takeOver.update(connection, watchdog, seen) != 1) {
        return null;
      }
      if (undo != null) {
        undo.tookOver(request, row);
      }
      return new ClaimResult.Claimed(record.attempt() + 1, true);
    }
    return new ClaimResult.Existing(record, row.leaseExpired());
  }
}
