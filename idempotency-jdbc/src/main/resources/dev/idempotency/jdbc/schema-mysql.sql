-- Idempotency records for dev.idempotency:idempotency-jdbc, MySQL 8 and MariaDB 10.5 or newer.
-- One row per key. Times are milliseconds since the Unix epoch (UTC).
-- A template with two placeholders, in Flyway and Liquibase syntax: "table" is the table name
-- (optionally schema-qualified), "name" the unqualified name that prefixes index names.
-- JdbcKeyStore.schemaSql(dialect, tableName) gives the filled script.
CREATE TABLE IF NOT EXISTS ${table} (
    key_id       VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state        VARCHAR(16)   CHARACTER SET ascii NOT NULL,
    owner_token  VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempt      INT           NOT NULL,
    fingerprint  VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload      LONGBLOB,
    created_at   BIGINT        NOT NULL,
    completed_at BIGINT,
    lease_until  BIGINT        NOT NULL,
    retain_until BIGINT        NOT NULL,
    debug_key    VARCHAR(1024) CHARACTER SET utf8mb4,
    PRIMARY KEY (key_id),
    INDEX ${name}_retain_idx (retain_until)
) ENGINE=InnoDB;
