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
  String purge() {
    return deleteExpired() + " ORDER BY retain_until LIMIT :limit";
  }
}
