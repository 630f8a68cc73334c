package dev.idempotency.jdbc;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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

  /**
   * PostgreSQL only, else null: the insert-if-absent and the select in one statement, so that a
   * replay costs one statement. It always returns one row: {@code inserted} is 1 when the row was
   * inserted; otherwise the row as the statement's snapshot sees it, all nulls if not visible.
   */
  final String insertOrSelect;

  /**
   * PostgreSQL only, else null: the rows of a batch by one array parameter, {@code keyIds}, each
   * looked up on its own by the primary key ({@code LATERAL ... OFFSET 0} keeps the planner from
   * turning it into a join). One statement for every batch size, with one plan whatever the sizes
   * of the batch and the table: with an {@code IN} list or {@code = ANY}, a plan cached while the
   * table was small (a sequential scan) stays in use as it grows, and every batch then reads the
   * whole table (measured: 500 ms per batch of 500 at 20,000 rows).
   */
  final String selectAny;

  final String reclaimExpired;
  final String takeOver;
  final String extend;
  final String complete;
  final String release;
  final String purgeBatch;
  final String now;
  private final JdbcDialect dialect;
  private final String table;
  private final String lease;
  private final String retention;
  private final Map<Integer, String> insertAllBySize = new ConcurrentHashMap<>();
  private final Map<Integer, String> selectAllBySize = new ConcurrentHashMap<>();

  Statements(JdbcDialect dialect, String table, boolean databaseTime) {
    this.dialect = dialect;
    this.table = table;
    now = databaseTime ? dialect.databaseNow : String.format(dialect.bigintParameter, "now");
    lease = String.format(dialect.bigintParameter, "leaseMillis");
    retention = String.format(dialect.bigintParameter, "retentionMillis");
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
    String read =
        "state, owner_token, attempt, fingerprint, payload, created_at, completed_at,"
            + " lease_until, retain_until";
    String selected = read + ", " + now + " AS db_now";
    select = "SELECT " + selected + " FROM " + table + " WHERE key_id = :keyId";
    insertOrSelect =
        dialect != JdbcDialect.POSTGRESQL
            ? null
            : "WITH ins AS ("
                + insertIfAbsent
                + " RETURNING 1) SELECT (SELECT count(*) FROM ins) AS inserted, "
                + selected
                + " FROM (SELECT 1) AS one LEFT JOIN "
                + table
                + " ON key_id = :keyId";
    selectAny =
        dialect != JdbcDialect.POSTGRESQL
            ? null
            : "SELECT r.*, "
                + now
                + " AS db_now FROM unnest(CAST(:keyIds AS VARCHAR[])) AS k(id) CROSS JOIN LATERAL"
                + " (SELECT "
                + read
                + ", key_id FROM "
                + table
                + " WHERE key_id = k.id OFFSET 0) AS r";
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
            + " SET owner_token = :ownerToken, attempt = attempt + 1, lease_until = LEAST("
            + now
            + " + "
            + lease
            + ", retain_until)"
            + " WHERE key_id = :keyId AND owner_token = :seenToken AND state = 'IN_PROGRESS'"
            + " AND lease_until <= "
            + now
            + " AND retain_until > "
            + now
            + " AND fingerprint = :fingerprint";
    extend =
        "UPDATE "
            + table
            + " SET lease_until = LEAST("
            + now
            + " + "
            + lease
            + ", retain_until)"
            + " WHERE key_id = :keyId AND owner_token = :ownerToken AND state = 'IN_PROGRESS'"
            + " AND retain_until > "
            + now;
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
   * Whether {@link #insertAllIfAbsent} exists for this dialect (not for H2, which is in-process).
   */
  boolean supportsMultiRowInsert() {
    return dialect != JdbcDialect.H2;
  }

  /**
   * One insert-if-absent for {@code rows} rows; row {@code i} binds {@code keyId_i}, {@code
   * ownerToken_i}, {@code fingerprint_i} and {@code debugKey_i}, and all rows share the lease and
   * retention of the batch.
   */
  String insertAllIfAbsent(int rows) {
    return insertAllBySize.computeIfAbsent(rows, this::buildInsertAll);
  }

  private String buildInsertAll(int rows) {
    StringBuilder values = new StringBuilder();
    for (int i = 0; i < rows; i++) {
      if (i > 0) {
        values.append(", ");
      }
      values
          .append("(:keyId_")
          .append(i)
          .append(", 'IN_PROGRESS', :ownerToken_")
          .append(i)
          .append(", 1, :fingerprint_")
          .append(i)
          .append(", NULL, ")
          .append(now)
          .append(", NULL, ")
          .append(now)
          .append(" + ")
          .append(lease)
          .append(", ")
          .append(now)
          .append(" + ")
          .append(retention)
          .append(", :debugKey_")
          .append(i)
          .append(')');
    }
    String insert =
        dialect == JdbcDialect.MYSQL
            ? "INSERT IGNORE INTO %s (%s) VALUES %s"
            : "INSERT INTO %s (%s) VALUES %s ON CONFLICT DO NOTHING";
    return String.format(insert, table, COLUMNS, values);
  }

  /**
   * The statement size for a batch of {@code count}: the next power of two, at most {@code max}.
   *
   * @param count the batch's size, from 1 to {@code max}
   * @param max the largest batch
   */
  static int paddedSize(int count, int max) {
    return count <= 1 ? 1 : Math.min(max, Integer.highestOneBit(count - 1) << 1);
  }

  /** Reads {@code rows} rows by {@code keyId_i}, with the key id and the database's time. */
  String selectAll(int rows) {
    return selectAllBySize.computeIfAbsent(rows, this::buildSelectAll);
  }

  private String buildSelectAll(int rows) {
    StringBuilder in = new StringBuilder();
    for (int i = 0; i < rows; i++) {
      in.append(i > 0 ? ", " : "").append(":keyId_").append(i);
    }
    return select
        .replace(" AS db_now FROM", " AS db_now, key_id FROM")
        .replace("WHERE key_id = :keyId", "WHERE key_id IN (" + in + ")");
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
