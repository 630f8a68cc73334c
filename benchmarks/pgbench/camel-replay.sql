-- Camel's JdbcMessageIdRepository.add on an id it has seen: one transaction with the count.
\set n random(0, 9999)
BEGIN;
SELECT COUNT(*) FROM pgbench_camel WHERE processorName = 'p' AND messageId = 'k' || :n;
COMMIT;
