package dev.idempotency.jdbc;

/** MySQL 8 and MariaDB 10.5 or newer: {@code INSERT IGNORE}, and a clock read in UTC. */
final class MySqlStatements extends Statements {

  MySqlStatements(String table, boolean databaseTime, boolean synchronousOutcomes) {
    super(table, databaseTime, synchronousOutcomes);
  }

  /**
   * UTC_TIMESTAMP and TIMESTAMPDIFF take no time zone into account; UNIX_TIMESTAMP(NOW(3)) went
   * through the session's, and read the hour after a daylight-saving change an hour off.
   */
  @Override
  String databaseNow() {
    return "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000"
        + " AS SIGNED)";
  }

  @Override
  String bigint(String parameter) {
    return ":" + parameter;
  }

  @Override
  String insertIfAbsent(String values) {
    return "INSERT IGNORE INTO " + table + " (" + COLUMNS + ") VALUES (" + values + ")";
  }

  @Override
  String insertAllIfAbsent(String rows) {
    return "INSERT IGNORE INTO " + table + " (" + COLUMNS + ") VALUES " + rows;
  }

  @Override
  String readLockWait() {
    return "SELECT CAST(@@SESSION.innodb_lock_wait_timeout AS CHAR)";
  }

  /** A session variable (a transaction has none of its own): restored after the claim. */
  @Override
  String setLockWait() {
    return "SET SESSION innodb_lock_wait_timeout = :lockWait";
  }

  /** Whole seconds, rounded up: InnoDB's lock wait has no finer unit. */
  @Override
  Object lockWaitValue(java.time.Duration wait) {
    long millis = Math.max(1, wait.toMillis());
    return (millis + 999) / 1000;
  }

  @Override
  Object restoredLockWait(String read) {
    return Long.valueOf(read);
  }

  /** {@code ER_LOCK_WAIT_TIMEOUT} (1205): InnoDB rolls back the statement, not the transaction. */
  @Override
  boolean isLockWaitTimeout(java.sql.SQLException failure) {
    return failure.getErrorCode() == 1205;
  }

  /** {@code ER_QUERY_INTERRUPTED} (1317): the watchdog's cancel. */
  @Override
  boolean isCancelled(java.sql.SQLException failure) {
    return failure.getErrorCode() == 1317;
  }

  /**
   * A locking read: under InnoDB's repeatable read a plain select reads the transaction's snapshot,
   * which may predate the commit of the row the insert just waited for.
   */
  @Override
  String selectLatest() {
    return select + " LOCK IN SHARE MODE";
  }

  @Override
  String purge() {
    return deleteExpired() + " ORDER BY retain_until LIMIT :limit";
  }
}
