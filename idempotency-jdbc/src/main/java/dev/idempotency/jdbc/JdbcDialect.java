package dev.idempotency.jdbc;

import java.util.Locale;

/**
 * The SQL dialects the JDBC store speaks. Detected from the connection's metadata unless set with
 * {@link JdbcKeyStore.Builder#dialect(JdbcDialect)}.
 */
public enum JdbcDialect {
  /** PostgreSQL 12 or newer. */
  POSTGRESQL(
      "schema-postgresql.sql",
      "INSERT INTO %s (%s) VALUES (%s) ON CONFLICT DO NOTHING",
      "CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)",
      "CAST(:%s AS BIGINT)",
      "DELETE FROM %1$s WHERE key_id IN (SELECT key_id FROM %1$s WHERE retain_until <= %2$s"
          + " LIMIT :limit FOR UPDATE SKIP LOCKED)"),
  /** MySQL 8 and MariaDB 10.5 or newer. */
  MYSQL(
      "schema-mysql.sql",
      "INSERT IGNORE INTO %s (%s) VALUES (%s)",
      // UTC_TIMESTAMP and TIMESTAMPDIFF take no time zone into account; UNIX_TIMESTAMP(NOW(3))
      // converted through the session's, an hour off around a daylight-saving change
      "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000"
          + " AS SIGNED)",
      ":%s",
      "DELETE FROM %1$s WHERE retain_until <= %2$s ORDER BY retain_until LIMIT :limit"),
  /** H2 2.x, in any compatibility mode. */
  H2(
      "schema-h2.sql",
      "MERGE INTO %1$s t USING (SELECT 1 AS one) s ON t.key_id = :keyId"
          + " WHEN NOT MATCHED THEN INSERT (%2$s) VALUES (%3$s)",
      "CAST(EXTRACT(EPOCH FROM CURRENT_TIMESTAMP) * 1000 AS BIGINT)",
      "CAST(:%s AS BIGINT)",
      "DELETE FROM %1$s WHERE retain_until <= %2$s FETCH FIRST :limit ROWS ONLY");

  final String schemaResource;
  final String insertIfAbsent;
  final String databaseNow;
  final String bigintParameter;
  final String purgeBatch;

  JdbcDialect(
      String schemaResource,
      String insertIfAbsent,
      String databaseNow,
      String bigintParameter,
      String purgeBatch) {
    this.schemaResource = schemaResource;
    this.insertIfAbsent = insertIfAbsent;
    this.databaseNow = databaseNow;
    this.bigintParameter = bigintParameter;
    this.purgeBatch = purgeBatch;
  }

  /**
   * The classpath resource holding this dialect's DDL for the default table name, for Flyway or
   * Liquibase, or to run by hand.
   *
   * @return a path such as {@code dev/idempotency/jdbc/schema-postgresql.sql}
   */
  public String schemaResource() {
    return "dev/idempotency/jdbc/" + schemaResource;
  }

  /**
   * Maps a JDBC {@code DatabaseMetaData.getDatabaseProductName()} to a dialect.
   *
   * @param productName the product name
   * @return the dialect
   * @throws IllegalArgumentException for an unsupported database
   */
  public static JdbcDialect fromProductName(String productName) {
    String name = productName == null ? "" : productName.toLowerCase(Locale.ROOT);
    if (name.contains("postgresql")) {
      return POSTGRESQL;
    }
    if (name.contains("mariadb") || name.contains("mysql")) {
      return MYSQL;
    }
    if (name.equals("h2")) {
      return H2;
    }
    throw new IllegalArgumentException(
        "unsupported database '"
            + productName
            + "'; supported are PostgreSQL, MySQL, MariaDB and H2 (set the dialect explicitly for"
            + " a compatible one)");
  }
}
