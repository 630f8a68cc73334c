/**
 * The JDBC key store: one row per key under a unique constraint, on PostgreSQL, MySQL/MariaDB and
 * H2, through Jdbi. Start with {@link
 * dev.idempotency.jdbc.JdbcKeyStore#builder(javax.sql.DataSource)}.
 */
@NullMarked
package dev.idempotency.jdbc;

import org.jspecify.annotations.NullMarked;
