package dev.idempotency.jdbc;

import java.util.Locale;

/**
 * The SQL dialects the JDBC store speaks. Detected from the connection's metadata unless set with
 * {@link JdbcKeyStore.Builder#dialect(JdbcDialect)}.
 */
public enum JdbcDialect {
  /** PostgreSQL 12 or newer. */
  POSTGRESQL("schema-postgresql.sql"),
  /** MySQL 8 and MariaDB 10.5 or newer. */
  MYSQL("schema-mysql.sql"),
  /** H2 2.x, in any compatibility mode. */
  H2("schema-h2.sql");

  private final String schemaResource;

  JdbcDialect(String schemaResource) {
    this.schemaResource = schemaResource;
  }

  /** This dialect's statements for a checked table name. */
  Statements statements(String table, boolean databaseTime, boolean synchronousOutcomes) {
    return switch (this) {
      case POSTGRESQL -> new PostgresStatements(table, databaseTime, synchronousOutcomes);
      case MYSQL -> new MySqlStatements(table, databaseTime, synchronousOutcomes);
      case H2 -> new H2Statements(table, databaseTime, synchronousOutcomes);
    };
  }

  /**
   * The classpath resource holding this dialect's DDL as a template: {@code ${table}} stands for
   * the table name (optionally schema-qualified) and {@code ${name}} for its unqualified name,
   * which prefixes the index and constraint names. Flyway and Liquibase fill such placeholders from
   * their configuration; {@link JdbcKeyStore#schemaSql(JdbcDialect, String)} gives the filled
   * script, to run by hand or paste into a migration.
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
