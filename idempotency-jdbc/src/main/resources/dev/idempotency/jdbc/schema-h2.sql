-- Idempotency records for dev.idempotency:idempotency-jdbc, H2 2.x.
-- One row per key. Times are milliseconds since the Unix epoch (UTC).
-- A template with two placeholders, in Flyway and Liquibase syntax: "table" is the table name
-- (optionally schema-qualified), "name" the unqualified name that prefixes index names.
-- JdbcKeyStore.schemaSql(dialect, tableName) gives the filled script.
CREATE TABLE IF NOT EXISTS ${table} (
    key_id       VARCHAR(128)  NOT NULL,
    state        VARCHAR(16)   NOT NULL,
    owner_token  VARCHAR(64)   NOT NULL,
    attempt      INTEGER       NOT NULL,
    fingerprint  VARCHAR(64)   NOT NULL,
    payload      VARBINARY,
    created_at   BIGINT        NOT NULL,
    completed_at BIGINT,
    lease_until  BIGINT        NOT NULL,
    retain_until BIGINT        NOT NULL,
    debug_key    VARCHAR(1024),
    CONSTRAINT ${name}_pk PRIMARY KEY (key_id)
);
CREATE INDEX IF NOT EXISTS ${name}_retain_idx ON ${table} (retain_until);
