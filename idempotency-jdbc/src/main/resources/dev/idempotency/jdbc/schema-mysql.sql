-- Idempotency records for dev.idempotency:idempotency-jdbc, MySQL 8 and MariaDB 10.5 or newer.
-- One row per key. Times are milliseconds since the Unix epoch (UTC).
CREATE TABLE IF NOT EXISTS idempotency_records (
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
    INDEX idempotency_records_retain_idx (retain_until)
) ENGINE=InnoDB;
