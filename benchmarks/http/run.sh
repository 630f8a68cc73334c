#!/usr/bin/env bash
# What @IdempotentEndpoint costs over HTTP: the plain handler against the guarded one, same work,
# same store, measured with wrk, alternately (plain, guarded, plain, guarded, ...) so that the load
# of a shared machine falls on both alike. First sends (a new key per request) and replays (a fixed
# set of 1,000 keys, stored by prime.py first), at each connection count, on each stack and store.
# On Redis a third handler, /floor, is measured between them (plain, floor, guarded, ...): the same
# Redis commands with Lettuce on the store's own connection and no SDK code (RedisFloor), so that
# guarded against floor is the SDK's own cost.
#
# Beside requests/s, each wrk run records the CPU time the application's JVM and redis-server spent
# in it (utime + stime of /proc/PID/stat, all threads) divided by the requests wrk completed: CPU
# per request moves far less with the machine's load than requests/s (summary.py gives both).
#
# Run:  benchmarks/http/run.sh [output dir]   (it builds this tree's SDK and the application first)
# Settings (environment), PROFILE_OPTS (see start) too: STACKS="mvc webflux" STORES="memory redis" CONNECTIONS="32 64" ROUNDS=3
#   DURATION=8s WARMUP=5s APP_WARMUP=20s WRK_THREADS=2 MVN_ARGS="-B -ntp" JAVA_OPTS="-Xmx1g" REDIS_SERVER=redis-server
#   MEMORY_MAXIMUM_SIZE=1000000 (the in-memory store holds every key of a run: no eviction, no WARN per evicted key)
# Needs wrk (Debian package wrk) and redis-server (Debian package redis-server) on the PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/target/results}
STACKS=${STACKS:-"mvc webflux"}
STORES=${STORES:-"memory redis"}
CONNECTIONS=${CONNECTIONS:-"32 64"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-5s}
APP_WARMUP=${APP_WARMUP:-20s}
WRK_THREADS=${WRK_THREADS:-2}
MVN_ARGS=${MVN_ARGS:-"-B -ntp"}
JAVA_OPTS=${JAVA_OPTS:-"-Xmx1g"}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
PROFILE_OPTS=${PROFILE_OPTS:-}
mkdir -p "$out"
results=$out/results.tsv
: > "$results"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# builds the SDK of this tree with the application (the reactor's jars, nothing installed); the
# last module built, this one, writes the class path
# (CLASSPATH_FILE: a class path written before, to run without building)
if [ -z "${CLASSPATH_FILE:-}" ]; then
  # shellcheck disable=SC2086
  mvn $MVN_ARGS -q -f "$here/../../pom.xml" -pl benchmarks/http -am package dependency:build-classpath \
    -DskipTests -Dmdep.outputFile="$here/target/classpath.txt"
  CLASSPATH_FILE=$here/target/classpath.txt
fi
classpath="$here/target/classes:$(cat "$CLASSPATH_FILE")"

app_pid=""
redis_pid=""
stop() {
  if [ -n "$app_pid" ]; then kill "$app_pid" 2>/dev/null || true; wait "$app_pid" 2>/dev/null || true; app_pid=""; fi
}
cleanup() {
  stop
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

redis_port=$(free_port)
if [[ " $STORES " == *" redis "* ]]; then
  "$REDIS_SERVER" --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --logfile "$out/redis.log" &
  redis_pid=$!
fi

# Starts the application and waits (up to 180 s, polling) until it answers.
start() { # stack store
  local type=servlet
  [ "$1" = webflux ] && type=reactive
  port=$(free_port)
  # PROFILE_OPTS: JVM options for a profile, %s standing for stack-store, e.g.
  # PROFILE_OPTS='-XX:StartFlightRecording=settings=profile,filename=/tmp/%s.jfr,dumponexit=true'
  # shellcheck disable=SC2086
  java $JAVA_OPTS ${PROFILE_OPTS//%s/$1-$2} -cp "$classpath" dev.idempotency.benchmarks.http.HttpBenchApplication \
    --server.port="$port" --spring.main.web-application-type="$type" \
    --idempotency.store="$2" --spring.data.redis.port="$redis_port" \
    --idempotency.memory.maximum-size="${MEMORY_MAXIMUM_SIZE:-1000000}" \
    > "$out/app-$1-$2.log" 2>&1 &
  app_pid=$!
  for _ in $(seq 1 360); do
    if curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -d '{}' "http://127.0.0.1:$port/plain"; then
      return 0
    fi
    kill -0 "$app_pid" 2>/dev/null || { cat "$out/app-$1-$2.log"; exit 1; }
    sleep 0.5
  done
  echo "the application did not start in 180 s" >&2; exit 1
}

clock_ticks=$(getconf CLK_TCK)
# CPU time of a process so far, in clock ticks: utime + stime (fields 14 and 15 of /proc/PID/stat,
# counted after the command name's closing parenthesis, which may hold spaces)
cpu_ticks() { # pid [user|system]
  if [ -z "$1" ]; then echo 0; return; fi
  sed 's/^.*) //' "/proc/$1/stat" | awk -v part="${2:-both}" \
    '{ print part == "user" ? $12 : part == "system" ? $13 : $12 + $13 }'
}

# One wrk run; appends a line to results.tsv.
measure() { # stack store mode connections handler round duration run-id [record]
  local line load app_before app_sys_before redis_before app_ticks app_sys_ticks redis_ticks requests
  load=$(cut -d' ' -f1 /proc/loadavg)
  app_before=$(cpu_ticks "$app_pid")
  app_sys_before=$(cpu_ticks "$app_pid" system)
  redis_before=$(cpu_ticks "$redis_pid")
  line=$(wrk -t"$WRK_THREADS" -c"$4" -d"$7" -s "$here/$3.lua" "http://127.0.0.1:$port/$5" -- "$8" "$5-$6-$(date +%s%N)" | grep '^RESULT')
  app_ticks=$(( $(cpu_ticks "$app_pid") - app_before ))
  app_sys_ticks=$(( $(cpu_ticks "$app_pid" system) - app_sys_before ))
  redis_ticks=$(( $(cpu_ticks "$redis_pid") - redis_before ))
  requests=$(echo "$line" | sed 's/.*requests=\([0-9]*\).*/\1/')
  # CPU microseconds per request completed (the application's in all, and of that in the kernel)
  line="$line $(awk -v a="$app_ticks" -v s="$app_sys_ticks" -v r="$redis_ticks" -v n="$requests" -v hz="$clock_ticks" \
    'BEGIN { if (n < 1) n = 1; printf "app_cpu_us=%.2f app_sys_us=%.2f redis_cpu_us=%.2f", a * 1e6 / hz / n, s * 1e6 / hz / n, r * 1e6 / hz / n }')"
  if [ "${9:-yes}" = yes ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$load" \
      "$(echo "$line" | sed 's/^RESULT //; s/ /\t/g')" >> "$results"
    echo "$1 $2 $3 c=$4 $5 round $6 load $load: ${line#RESULT }"
  fi
}

run=$(date +%s)
for stack in $STACKS; do
  for store in $STORES; do
    handlers="plain guarded"
    [ "$store" = redis ] && handlers="plain floor guarded"
    start "$stack" "$store"
    # the application's warm-up (JIT), on every handler
    for handler in $handlers; do
      measure "$stack" "$store" first-send 32 "$handler" 0 "$APP_WARMUP" "$run-warm" no
    done
    for connections in $CONNECTIONS; do
      for mode in first-send replay; do
        id="$run-$stack-$store-$connections-$mode"
        if [ "$mode" = replay ]; then
          for handler in $handlers; do # stores the fixed keys (the floor's and the guard's)
            [ "$handler" = plain ] || python3 "$here/prime.py" "http://127.0.0.1:$port/$handler" "$id"
          done
        fi
        # warm-up at this connection count
        for handler in $handlers; do
          measure "$stack" "$store" "$mode" "$connections" "$handler" 0 "$WARMUP" "$id" no
        done
        for round in $(seq 1 "$ROUNDS"); do
          for handler in $handlers; do
            measure "$stack" "$store" "$mode" "$connections" "$handler" "$round" "$DURATION" "$id"
          done
        done
      done
    done
    stop
  done
done
python3 "$here/summary.py" "$results" | tee "$out/summary.md"
