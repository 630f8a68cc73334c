#!/usr/bin/env bash
# The server's side of the PostgreSQL comparison in BENCHMARKS.md (issue #18): the statements the
# guard and Camel's JdbcMessageIdRepository send for a first send and a replay, run by pgbench (a C
# client, so no Java client shares the machine's CPU), 1 and 16 clients, prepared statements.
#
#   benchmarks/pgbench/run.sh HOST PORT [USER] [SECONDS]
#
# Creates pgbench_idempotency (the store's DDL) and pgbench_camel (Camel's default DDL), with
# 10,000 stored keys each for the replays, in the database "postgres"; drops them at the end.
set -euo pipefail
export PGOPTIONS="-c client_min_messages=warning"
here=$(cd "$(dirname "$0")" && pwd)
host=${1:?host}; port=${2:?port}; user=${3:-postgres}; seconds=${4:-8}
pgbench=${PGBENCH:-$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1)}
psql=(psql -h "$host" -p "$port" -U "$user" -q -v ON_ERROR_STOP=1 postgres)
ddl=$(sed -e 's/\${table}/pgbench_idempotency/g' -e 's/\${name}/pgbench_idempotency/g' \
  "$here/../../idempotency-jdbc/src/main/resources/dev/idempotency/jdbc/schema-postgresql.sql")
"${psql[@]}" -c "DROP TABLE IF EXISTS pgbench_idempotency, pgbench_camel"
"${psql[@]}" -c "$ddl"
"${psql[@]}" -c "CREATE TABLE pgbench_camel (processorName VARCHAR(255), messageId VARCHAR(100), createdAt TIMESTAMP, PRIMARY KEY (processorName, messageId))"
"${psql[@]}" -c "INSERT INTO pgbench_idempotency SELECT 'k' || n, 'COMPLETED', 'token', 1, '', '\x6e5f30313233343536373839616263640a'::bytea, 1, 2, 3, 9999999999999, NULL FROM generate_series(0, 9999) n"
"${psql[@]}" -c "INSERT INTO pgbench_camel SELECT 'p', 'k' || n, now() FROM generate_series(0, 9999) n"
"${psql[@]}" -c "VACUUM ANALYZE pgbench_idempotency"
"${psql[@]}" -c "VACUUM ANALYZE pgbench_camel"
"${psql[@]}" -At -c "SELECT 'fsync=' || current_setting('fsync') || ' synchronous_commit=' || current_setting('synchronous_commit')"
for clients in 1 16; do
  for shape in ours-first-send camel-first-send ours-replay camel-replay; do
    tps=$("$pgbench" -h "$host" -p "$port" -U "$user" -n -M prepared -c "$clients" -j 2 -T "$seconds" \
      -f "$here/$shape.sql" postgres 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    printf '%-18s clients=%-2s %10.0f per second\n' "$shape" "$clients" "$tps"
  done
done
"${psql[@]}" -c "DROP TABLE pgbench_idempotency, pgbench_camel"
