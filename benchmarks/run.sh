#!/usr/bin/env bash
# Runs the figures of BENCHMARKS.md: single-threaded latency (sample mode), then throughput with
# 8 and 32 threads, the SQL shapes at 32 threads, batches, the guard beside Camel's repositories
# at 1 and 16 threads, then bytes per key and Redis server time. Build first: mvn -q -pl benchmarks -am package -DskipTests -Pbenchmarks-jar
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results}
mkdir -p "$out"
jar=benchmarks/target/benchmarks.jar
common=(-f 1 -wi 2 -w 2s -i 3 -r 2s)
java -jar "$jar" GuardBenchmark "${common[@]}" -t 1 -bm sample -tu us -rf json -rff "$out/latency-t1.json" | tee "$out/latency-t1.txt"
java -jar "$jar" GuardBenchmark "${common[@]}" -t 8 -bm thrpt -tu s -rf json -rff "$out/throughput-t8.json" | tee "$out/throughput-t8.txt"
java -jar "$jar" GuardBenchmark "${common[@]}" -t 32 -bm thrpt -tu s -rf json -rff "$out/throughput-t32.json" | tee "$out/throughput-t32.txt"
java -jar "$jar" SqlShapesBenchmark "${common[@]}" -t 32 -bm thrpt -tu s -rf json -rff "$out/sql-shapes-t32.json" | tee "$out/sql-shapes-t32.txt"
java -jar "$jar" BatchAndAsyncBenchmark "${common[@]}" -t 1 -bm thrpt -tu s -rf json -rff "$out/batch-async.json" | tee "$out/batch-async.txt"
java -jar "$jar" PeersBenchmark "${common[@]}" -t 1 -bm thrpt -tu s -rf json -rff "$out/peers-t1.json" | tee "$out/peers-t1.txt"
java -jar "$jar" PeersBenchmark "${common[@]}" -t 16 -bm thrpt -tu s -rf json -rff "$out/peers-t16.json" | tee "$out/peers-t16.txt"
java -Xmx4g -cp "$jar" dev.idempotency.benchmarks.MemoryFootprint | tee "$out/memory.txt"
java -cp "$jar" dev.idempotency.benchmarks.RedisServerCost | tee "$out/redis-server-cost.txt"
