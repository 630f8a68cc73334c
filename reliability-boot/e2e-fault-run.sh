#!/usr/bin/env bash
# The end-to-end fault run through a real Boot application (docs/guarantees.md): the same
# E2eFaultRunTest that `mvn verify` runs for 30 s, for as long as you like.
#
#   reliability-boot/e2e-fault-run.sh --minutes 3 --seed 7
#
# Each run's history (sends-provider.log, calls-clients.log, faults.log, app-<n>.log, report.txt)
# stays in reliability-boot/target/e2e-runs/seed-<seed>-<time>/. The exit status is Maven's:
# non-zero if the checker found a second send without an allowed cause, or anything lost.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=3
seed=7
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    *) echo "unknown argument: $1 (expected --minutes N, --seed N)" >&2; exit 2 ;;
  esac
done
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "--minutes must be a number, got: $minutes" >&2; exit 2; }
[[ "$seed" =~ ^-?[0-9]+$ ]] || { echo "--seed must be an integer, got: $seed" >&2; exit 2; }
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
status=0
mvn --batch-mode --no-transfer-progress -pl reliability-boot -am verify \
  -Dtest='E2eFaultRunTest' -Dsurefire.failIfNoSpecifiedTests=false -Dspotless.check.skip=true \
  -Dlettuce.compat.skip=true -Dsurefire.fork.timeout=0 -De2e.seconds="$seconds" -De2e.seed="$seed" || status=$?
echo
cat "$(ls -td reliability-boot/target/e2e-runs/seed-"$seed"-*/ | head -1)report.txt"
exit $status
