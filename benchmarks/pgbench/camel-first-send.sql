-- Camel's JdbcMessageIdRepository.add on a new id: one transaction, a count, then the insert.
\set n random(0, 2000000000)
BEGIN;
SELECT COUNT(*) FROM pgbench_camel WHERE processorName = 'p' AND messageId = 'f' || :client_id || '-' || :n;
INSERT INTO pgbench_camel (processorName, messageId, createdAt) VALUES ('p', 'f' || :client_id || '-' || :n, now());
COMMIT;
