#!/usr/bin/env bash
# How the cost grows with the work (issue #28): every step of ScaleBench in order, against servers
# that run outside the build (the peers harness's PostgreSQL, fsync on, and two Redis servers).
#
#   mvn -Dmaven.repo.local=... -pl benchmarks -am package -DskipTests -Pbenchmarks-jar
#   benchmarks/scale/run.sh OUT_DIR
#
# Settings (environment):
#   PG=127.0.0.1:55432           PostgreSQL (user postgres, no password), e.g. the peers harness's
#   REDIS_BIG=127.0.0.1:56381    a Redis that will hold 10 million keys (about 2.5 GB of memory)
#   REDIS_EMPTY=127.0.0.1:56382  a Redis left empty, for the comparison
#   LIVE=10000000 EXPIRED=1000000 SMALL=100000 CAMPAIGN=1000000 KEYS=5000 ROUNDS=3
#   STEPS="pg-fill pg-latency pg-purge redis-fill redis-latency campaign" (a subset to rerun)
#
# Writes OUT_DIR/scale.jsonl (every figure) and OUT_DIR/scale.log (the text), then prints the
# Markdown charts (benchmarks/scale/charts.py). Takes 30 to 60 minutes on a 2-core machine.
set -euo pipefail
out=${1:?usage: run.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
jar="$here/../target/benchmarks.jar"
[[ -f "$jar" ]] || { echo "no $jar: build the benchmarks module first" >&2; exit 2; }
PG=${PG:-127.0.0.1:55432}
REDIS_BIG=${REDIS_BIG:-127.0.0.1:56381}
REDIS_EMPTY=${REDIS_EMPTY:-127.0.0.1:56382}
LIVE=${LIVE:-10000000} EXPIRED=${EXPIRED:-1000000} SMALL=${SMALL:-100000}
CAMPAIGN=${CAMPAIGN:-1000000} KEYS=${KEYS:-5000} ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-"pg-fill pg-latency pg-purge redis-fill redis-latency campaign"}
mkdir -p "$out"
json="json=$out/scale.jsonl"
bench() { java -Xmx${XMX:-2g} -cp "$jar" dev.idempotency.benchmarks.ScaleBench "$@" "$json" 2>&1 |
  grep -v ' INFO ' | tee -a "$out/scale.log"; }
step() { [[ " $STEPS " == *" $1 "* ]]; }
echo "== $(date -u +%FT%TZ) $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/scale.log"

if step pg-fill; then
  bench pg-fill pg="$PG" table=idem_small live="$SMALL" indexes=inline
  bench pg-fill pg="$PG" table=idem_small_built live="$SMALL" indexes=after
  bench pg-fill pg="$PG" table=idem_big live="$LIVE" expired="$EXPIRED" indexes=after
fi
if step pg-latency; then
  bench pg-latency pg="$PG" tables=idem_small,idem_big threads=1,16 keys="$KEYS" rounds="$ROUNDS"
fi
if step pg-purge; then
  bench pg-purge pg="$PG" table=idem_big threads=16 seconds=20
  bench pg-size pg="$PG" table=idem_big
fi
if step redis-fill; then
  bench redis-fill redis="$REDIS_BIG" keys="$LIVE"
  bench redis-size redis="$REDIS_EMPTY"
fi
if step redis-latency; then
  bench redis-latency redis="$REDIS_EMPTY,$REDIS_BIG" threads=1,16 keys="$KEYS" rounds="$ROUNDS"
fi
if step campaign; then
  for store in postgresql redis; do
    for mode in floor chunked batch; do
      XMX=${CAMPAIGN_XMX:-4g} bench campaign store="$store" pg="$PG" redis="$REDIS_EMPTY" \
        n="$CAMPAIGN" mode="$mode" prefix="camp-$mode:"
    done
  done
fi
python3 "$here/charts.py" --scale "$out/scale.jsonl"
