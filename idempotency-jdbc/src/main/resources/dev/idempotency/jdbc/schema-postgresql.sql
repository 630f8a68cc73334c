-- Idempotency records for dev.idempotency:idempotency-jdbc, PostgreSQL 12 or newer.
-- One row per key. Times are milliseconds since the Unix epoch (UTC).
-- A template with two placeholders, in Flyway and Liquibase syntax: "table" is the table name
-- (optionally schema-qualified), "name" the unqualified name that prefixes index names.
-- JdbcKeyStore.schemaSql(dialect, tableName) gives the filled script.
CREATE TABLE IF NOT EXISTS ${table} (
    key_id       VARCHAR(128)  NOT NULL,  -- SHA-256 digest of the key, base64url; never the raw key
    state        VARCHAR(16)   NOT NULL,  -- IN_PROGRESS, COMPLETED or FAILED
    owner_token  VARCHAR(64)   NOT NULL,  -- random per claim; fences every later write
    attempt      INTEGER       NOT NULL,  -- 1, then +1 per lease takeover
    fingerprint  VARCHAR(64)   NOT NULL,  -- digest of the request, '' when none
    payload      BYTEA,                   -- the stored outcome, NULL while IN_PROGRESS
    created_at   BIGINT        NOT NULL,
    completed_at BIGINT,
    lease_until  BIGINT        NOT NULL,
    retain_until BIGINT        NOT NULL,  -- the end of the window; the row counts as absent after it
    debug_key    VARCHAR(1024),           -- the raw key, only if storeRawKeys(true)
    CONSTRAINT ${name}_pk PRIMARY KEY (key_id)
);
CREATE INDEX IF NOT EXISTS ${name}_retain_idx ON ${table} (retain_until);
