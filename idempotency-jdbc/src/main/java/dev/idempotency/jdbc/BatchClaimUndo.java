package dev.idempotency.jdbc;

import dev.idempotency.spi.ClaimRequest;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jdbi.v3.core.Handle;
import org.jdbi.v3.core.statement.PreparedBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one run of a batch claim has written, taken back if the run then fails: the claim's
 * statements run in auto-commit, each committed as it ends, while a batch that fails is reported
 * whole ({@code KeyStore.claimAll}: nothing claimed). Without this, the rows a failed batch had
 * inserted stayed in progress under owner tokens no call holds, and every repeat was told they were
 * in flight until their lease ended, though nothing sent them. Taken back, each fenced by the
 * batch's owner token:
 *
 * <ol>
 *   <li>a row the batch inserted, or reclaimed past its window, is deleted (the release statement);
 *   <li>a row whose lapsed lease the batch took over gets back the owner token, attempt, lease and
 *       window it had, so that its former owner's fenced writes still land and a strict takeover
 *       policy still sees an outcome unknown.
 * </ol>
 *
 * Each list is one JDBC batch (one round trip), given at least {@link #GRACE} past the operation's
 * deadline, which the failure may have used up. A batch that succeeds runs no more statements.
 */
final class BatchClaimUndo {

  private static final Logger log = LoggerFactory.getLogger(JdbcKeyStore.class);

  /**
   * What the undo gets when the operation's deadline has passed: fenced writes of at most a batch
   * of rows by primary key, which no other call holds, take milliseconds.
   */
  static final Duration GRACE = Duration.ofMillis(500);

  private final Map<String, ClaimRequest> inserted = new LinkedHashMap<>();
  private final Map<String, TakenOver> takenOver = new LinkedHashMap<>();

  private record TakenOver(ClaimRequest request, Rows.Row seen) {}

  /**
   * The batch inserted (or may have inserted) this key's row, or reclaimed it past its window,
   * under the request's owner token.
   */
  void inserted(ClaimRequest request) {
    inserted.put(request.keyId(), request);
  }

  /** Another call inserted this key's row first, as a read after {@link #inserted} showed. */
  void notInserted(ClaimRequest request) {
    inserted.remove(request.keyId());
  }

  /** The batch took over the lapsed lease of {@code seen}, this key's row as it was read. */
  void tookOver(ClaimRequest request, Rows.Row seen) {
    takenOver.put(request.keyId(), new TakenOver(request, seen));
  }

  /**
   * Takes back what was recorded, after the batch failed with {@code failure}; a failure to do so
   * is added to it as suppressed, and the rows stay held until their lease ends, as after a crash.
   */
  void undo(Handle handle, Statements sql, StatementWatchdog watchdog, RuntimeException failure) {
    if (inserted.isEmpty() && takenOver.isEmpty()) {
      return;
    }
    watchdog.allowAtLeast(GRACE);
    try {
      if (!inserted.isEmpty()) {
        PreparedBatch release = handle.prepareBatch(sql.release);
        for (ClaimRequest request : inserted.values()) {
          release.bind("keyId", request.keyId()).bind("ownerToken", request.ownerToken()).add();
        }
        release.execute();
      }
      if (!takenOver.isEmpty()) {
        PreparedBatch restore = handle.prepareBatch(sql.restoreTakenOver);
        for (TakenOver taken : takenOver.values()) {
          restore
              .bind("keyId", taken.request().keyId())
              .bind("ownerToken", taken.request().ownerToken())
              .bind("seenToken", taken.seen().ownerToken())
              .bind("seenAttempt", taken.seen().record().attempt())
              .bind("seenLeaseUntil", taken.seen().leaseUntil())
              .bind("seenRetainUntil", taken.seen().retainUntil())
              .add();
        }
        restore.execute();
      }
    } catch (RuntimeException undoFailed) {
      // a JdbiException, or a driver's unchecked failure on a broken connection: the batch's own
      // failure is what the caller gets
      failure.addSuppressed(undoFailed);
      log.warn(
          "A failed batch claim could not take back the {} claims it had written{}: those keys"
              + " stay in progress until their lease ends",
          inserted.size() + takenOver.size(),
          SqlExecutor.describe(undoFailed));
    }
  }
}
