package dev.idempotency.jdbc;

import java.util.regex.Pattern;

/**
 * The SQL of one store, built once from checked parts: a validated table name, the dialect's fixed
 * fragments, and the time source. Values are always bound as parameters.
 */
final class Statements {

  private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

  private static final String COLUMNS =
      "key_id, state, owner_token, attempt, fingerprint, payload, created_at, completed_at,"
          + " lease_until, retain_until, debug_key";

  final String insertIfAbsent;
  final String select;
  final String reclaimExpired;
  final String takeOver;
  final String complete;
  final String release;
  final String purgeBatch;
  final String now;

  Statements(JdbcDialect dialect, String table, boolean databaseTime) {
    now = databaseTime ? dialect.databaseNow : String.format(dialect.bigintParameter, "now");
    String lease = String.format(dialect.bigintParameter, "leaseMillis");
    String retention = String.format(dialect.bigintParameter, "retentionMillis");
    String values =
        ":keyId, 'IN_PROGRESS', :ownerToken, 1, :fingerprint, NULL, "
            + now
            + ", NULL, "
            + now
            + " + "
            + lease
            + ", "
            + now
            + " + "
            + retention
            + ", :debugKey";
    insertIfAbsent = String.format(dialect.insertIfAbsent, table, COLUMNS, values);
    select =
        "SELECT state, owner_token, attempt, fingerprint, payload, created_at, completed_at,"
            + " lease_until, retain_until, "
            + now
            + " AS db_now FROM "
            + table
            + " WHERE key_id = :keyId";
    reclaimExpired =
        "UPDATE "
            + table
            + " SET state = 'IN_PROGRESS', owner_token = :ownerToken, attempt = 1,"
            + " fingerprint = :fingerprint, payload = NULL, created_at = "
            + now
            + ", completed_at = NULL, lease_until = "
            + now
            + " + "
            + lease
            + ", retain_until = "
            + now
            + " + "
            + retention
            + ", debug_key = :debugKey"
            + " WHERE key_id = :keyId AND owner_token = :seenToken AND state = :seenState"
            + " AND retain_until <= "
            + now;
    takeOver =
        "UPDATE "
            + table
            + " SET owner_token = :ownerToken, attempt = attempt + 1, lease_until = "
            + now
            + " + "
            + lease
            + " WHERE key_id = :keyId AND owner_token = :seenToken AND state = 'IN_PROGRESS'"
            + " AND lease_until <= "
            + now
            + " AND retain_until > "
            + now
            + " AND fingerprint = :fingerprint";
    complete =
        "UPDATE "
            + table
            + " SET state = :state, payload = :payload, completed_at = "
            + now
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'";
    release =
        "DELETE FROM "
            + table
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'";
    purgeBatch = String.format(dialect.purgeBatch, table, now);
  }

  /**
   * Checks a table name: a plain identifier, optionally schema-qualified, so that configuration can
   * never inject SQL.
   */
  static String requireTableName(String tableName) {
    if (tableName == null) {
      throw new NullPointerException("tableName must not be null");
    }
    String[] parts = tableName.split("\\.", -1);
    boolean valid = parts.length <= 2;
    for (String part : parts) {
      valid &= IDENTIFIER.matcher(part).matches();
    }
    if (!valid) {
      throw new IllegalArgumentException(
          "tableName must be a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 characters),"
              + " optionally schema-qualified, was '"
              + tableName
              + "'");
    }
    return tableName;
  }

  /** The DDL of a dialect for a table name: the shipped script with its identifiers renamed. */
  static String schema(String script, String tableName) {
    String unqualified = tableName.substring(tableName.lastIndexOf('.') + 1);
    return script
        .replace("idempotency_records_pk", "\u0000pk")
        .replace("idempotency_records_retain_idx", "\u0000retain_idx")
        .replace("idempotency_records", tableName)
        .replace("\u0000", unqualified + "_");
  }
}
