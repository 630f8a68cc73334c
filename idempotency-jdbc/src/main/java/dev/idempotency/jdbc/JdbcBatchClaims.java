package dev.idempotency.jdbc;

import dev.idempotency.UnreadableRecordException;
import dev.idempotency.spi.ClaimRequest;
import dev.idempotency.spi.ClaimResult;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jdbi.v3.core.Handle;
import org.jdbi.v3.core.statement.Update;

/**
 * The batch claim, in one of two orders, as the dialect allows:
 *
 * <ol>
 *   <li>Inserting first (PostgreSQL): one insert-if-absent of every key of the chunk that reports
 *       the rows it inserted, then one select of the keys it did not insert. A chunk of new keys so
 *       costs one statement, a replayed one two.
 *   <li>Reading first (MySQL, MariaDB): one select of every key of the chunk; if some are absent,
 *       one multi-row insert-if-absent of those and one select of them again (a row holding this
 *       batch's owner token was inserted by it). A replayed chunk so costs one statement, a new one
 *       three.
 * </ol>
 *
 * Either way, a row that exists goes through the single-key {@link JdbcClaims#decide} (past its
 * window, an expired lease), and a key whose row vanished meanwhile through {@link
 * JdbcClaims#claim}. Each statement commits on its own (auto-commit); if one fails, what the batch
 * had written is taken back before the failure is reported ({@link BatchClaimUndo}).
 */
final class JdbcBatchClaims {

  private final Statements sql;
  private final JdbcClaims claims;
  private final StatementWatchdog watchdog;
  private final int maxBatch;

  JdbcBatchClaims(Statements sql, JdbcClaims claims, StatementWatchdog watchdog, int maxBatch) {
    this.sql = sql;
    this.claims = claims;
    this.watchdog = watchdog;
    this.maxBatch = maxBatch;
  }

  /**
   * Whether this dialect claims a batch in few statements, and the batch shares one time, lease and
   * window so that one statement can bind them once; otherwise claim key by key.
   */
  boolean applies(List<ClaimRequest> requests) {
    if (!sql.insertsBatches()) {
      return false;
    }
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
   * Claims the batch; if that fails, takes back what it had written ({@link BatchClaimUndo}) before
   * the failure reaches the caller, who is told that nothing was claimed.
   */
  List<ClaimResult> claimAll(Handle handle, List<ClaimRequest> requests) {
    BatchClaimUndo undo = new BatchClaimUndo();
    try {
      return claimAll(handle, requests, undo);
    } catch (RuntimeException failure) {
      undo.undo(handle, sql, watchdog, failure);
      throw failure;
    }
  }

  private List<ClaimResult> claimAll(
      Handle handle, List<ClaimRequest> requests, BatchClaimUndo undo) {
    Map<String, String> inserted =
        sql.insertsBatchesFirst() ? sql.insertAllReturningOwners(handle, requests) : Map.of();
    for (ClaimRequest request : requests) {
      if (insertedBy(inserted, request)) {
        undo.inserted(request);
      }
    }
    Map<String, Rows.Row> rows;
    try {
      if (sql.insertsBatchesFirst()) {
        List<ClaimRequest> notInserted = new ArrayList<>();
        for (ClaimRequest request : requests) {
          if (!insertedBy(inserted, request)) {
            notInserted.add(request);
          }
        }
        rows = notInserted.isEmpty() ? Map.of() : select(handle, notInserted);
      } else {
        rows = selectOrInsert(handle, requests, undo);
      }
    } catch (UnreadableRecordException oneRowUnreadable) {
      return oneByOne(handle, requests, inserted, undo);
    }
    List<ClaimResult> results = new ArrayList<>(requests.size());
    for (ClaimRequest request : requests) {
      if (insertedBy(inserted, request)) {
        results.add(new ClaimResult.Claimed(1, false));
        continue;
      }
      Rows.Row row = rows.get(request.keyId());
      ClaimResult result = null;
      if (row != null && row.ownedBy(request.ownerToken())) {
        undo.inserted(request);
        int attempt = row.record().attempt();
        result = new ClaimResult.Claimed(attempt, attempt > 1);
      } else if (row != null) {
        result = claims.decide(handle.getConnection(), request, row, undo);
      }
      results.add(result != null ? result : claims.claim(handle.getConnection(), request, undo));
    }
    return results;
  }

  /**
   * The batch read found a row it cannot read: each key not inserted by the batch is claimed alone,
   * so that only the unreadable row's key fails ({@link ClaimResult.Failed}) and the others claim.
   */
  private List<ClaimResult> oneByOne(
      Handle handle,
      List<ClaimRequest> requests,
      Map<String, String> inserted,
      BatchClaimUndo undo) {
    List<ClaimResult> results = new ArrayList<>(requests.size());
    for (ClaimRequest request : requests) {
      if (insertedBy(inserted, request)) {
        results.add(new ClaimResult.Claimed(1, false));
        continue;
      }
      try {
        results.add(claims.claim(handle.getConnection(), request, undo));
      } catch (UnreadableRecordException unreadable) {
        results.add(new ClaimResult.Failed(unreadable));
      }
    }
    return results;
  }

  private static boolean insertedBy(Map<String, String> inserted, ClaimRequest request) {
    return request.ownerToken().equals(inserted.get(request.keyId()));
  }

  /** Reads first: the rows of every key, those absent inserted and read again. */
  private Map<String, Rows.Row> selectOrInsert(
      Handle handle, List<ClaimRequest> requests, BatchClaimUndo undo) {
    Map<String, Rows.Row> rows = select(handle, requests);
    List<ClaimRequest> absent = new ArrayList<>();
    for (ClaimRequest request : requests) {
      if (!rows.containsKey(request.keyId())) {
        absent.add(request);
      }
    }
    if (!absent.isEmpty()) {
      insertAll(handle, absent);
      // inserted unless another call did first, which the select tells
      for (ClaimRequest request : absent) {
        undo.inserted(request);
      }
      rows.putAll(select(handle, absent));
      for (ClaimRequest request : absent) {
        Rows.Row row = rows.get(request.keyId());
        if (row != null && !row.ownedBy(request.ownerToken())) {
          undo.notInserted(request);
        }
      }
    }
    return rows;
  }

  private Map<String, Rows.Row> select(Handle handle, List<ClaimRequest> requests) {
    List<String> keyIds = new ArrayList<>(requests.size());
    for (ClaimRequest request : requests) {
      keyIds.add(request.keyId());
    }
    return sql.selectAll(handle, keyIds, requests.get(0).now(), maxBatch);
  }

  /**
   * Inserts-if-absent a batch in one statement. Statements come in power-of-two sizes, so that a
   * store prepares at most ten of them; the last request fills the rows past the batch (inserting
   * the same key twice in one statement is a no-op).
   */
  private void insertAll(Handle handle, List<ClaimRequest> requests) {
    int size = Statements.paddedSize(requests.size(), maxBatch);
    ClaimRequest first = requests.get(0);
    Update insert = handle.createUpdate(sql.insertAll(size));
    sql.bindNow(insert, first.now());
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
}
