#!/usr/bin/env bash
# The long randomized fault run (docs/guarantees.md): the same FaultRunTest that `mvn verify` runs
# for 10 s per store, for as long as you like.
#
#   reliability/fault-run.sh --minutes 4 --seed 7                  every store, 4 minutes each
#   reliability/fault-run.sh --minutes 1 --seed 3 --stores redis   only the stores named (comma-separated:
#                                                                  postgresql, postgresql_client_time,
#                                                                  mariadb, redis, redis_cluster, dynamodb,
#                                                                  postgresql_joined, mariadb_joined)
#
# postgresql_joined and mariadb_joined are the joined-transaction mode (docs/guarantees.md): every
# call enqueues an outbox row inside the application's transaction, and the checker allows no
# duplicate enqueue at all, kills included.
#
# Each run's history stays in reliability/target/fault-runs/<store>-<seed>/, the table of every run in
# reliability/target/fault-runs.md. The exit status is Maven's: non-zero if the checker failed a store.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=4
seed=7
stores=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --stores) stores="$2"; shift 2 ;;
    *) echo "unknown argument: $1 (expected --minutes N, --seed N, --stores a,b)" >&2; exit 2 ;;
  esac
done
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "--minutes must be a number, got: $minutes" >&2; exit 2; }
[[ "$seed" =~ ^-?[0-9]+$ ]] || { echo "--seed must be an integer, got: $seed" >&2; exit 2; }
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
rm -f reliability/target/fault-runs.md
args=(-Dfaultrun.seconds="$seconds" -Dfaultrun.seed="$seed")
[[ -n "$stores" ]] && args+=(-Dfaultrun.stores="$stores")
mvn --batch-mode --no-transfer-progress -pl reliability -am verify \
  -Dtest='FaultRunTest' -Dsurefire.failIfNoSpecifiedTests=false -Dspotless.check.skip=true -Dlettuce.compat.skip=true -Dsurefire.fork.timeout=0 "${args[@]}"
echo
cat reliability/target/fault-runs.md
# The end-to-end run through a real Boot application is reliability-boot/e2e-fault-run.sh.
