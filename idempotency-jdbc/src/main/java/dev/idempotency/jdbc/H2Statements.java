package dev.idempotency.jdbc;

/**
 * H2 2.x, in any compatibility mode: {@code MERGE ... WHEN NOT MATCHED} inserts if absent (H2's own
 * {@code MERGE ... KEY} would overwrite), and batches go key by key, since H2 runs in-process and a
 * round trip costs nothing.
 */
final class H2Statements extends Statements {

  H2Statements(String table, boolean databaseTime, boolean synchronousOutcomes) {
    super(table, databaseTime, synchronousOutcomes);
  }

  @Override
  String databaseNow() {
    return "CAST(EXTRACT(EPOCH FROM CURRENT_TIMESTAMP) * 1000 AS BIGINT)";
  }

  @Override
  String insertIfAbsent(String values) {
    return "MERGE INTO "
        + table
        + " t USING (SELECT 1 AS one) s ON t.key_id = :keyId WHEN NOT MATCHED THEN INSERT ("
        + COLUMNS
        + ") VALUES ("
        + values
        + ")";
  }

  /** Never used: {@link #insertsBatches()} is false. */
  @Override
  String insertAllIfAbsent(String rows) {
    throw new UnsupportedOperationException("H2 claims batches key by key");
  }

  @Override
  boolean insertsBatches() {
    return false;
  }

  @Override
  String transactionId() {
    return "SELECT CAST(TRANSACTION_ID() AS VARCHAR)";
  }

  /** {@code STATEMENT_WAS_CANCELED} (57014, its SQLState HY008). */
  @Override
  boolean isCancelled(java.sql.SQLException failure) {
    return failure.getErrorCode() == 57014;
  }

  @Override
  String readLockWait() {
    return "SELECT CAST(LOCK_TIMEOUT() AS VARCHAR)";
  }

  @Override
  String setLockWait() {
    return "SET LOCK_TIMEOUT :lockWait";
  }

  /** Milliseconds, at least 1 (0 would not wait at all). */
  @Override
  Object lockWaitValue(java.time.Duration wait) {
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, wait.toMillis()));
  }

  @Override
  Object restoredLockWait(String read) {
    return Integer.valueOf(read);
  }

  /** {@code LOCK_TIMEOUT_1} (50200); a deadlock H2 detects is 40001. */
  @Override
  boolean isLockWaitTimeout(java.sql.SQLException failure) {
    return failure.getErrorCode() == 50200;
  }

  @Override
  String purge() {
    return deleteExpired() + " FETCH FIRST :limit ROWS ONLY";
  }
}
