#!/usr/bin/env bash
# Adds the "floor-redis" reference line to a copy of ../shared/peers (see BENCHMARKS.md, run 9):
#   benchmarks/peers/add-floor.sh /path/to/peers-copy
# then, in that copy: OURS=1 PEERS="camel-redis ours-redis floor-redis" ./run.sh
# It copies adapter-floor/ into the harness, lists it as a module of the -Pours profile, and adds it
# to run.sh's peers. Running it twice changes nothing more.
set -euo pipefail
harness=${1:?usage: add-floor.sh HARNESS_DIR (a writable copy of ../shared/peers)}
here=$(cd "$(dirname "$0")" && pwd)
[[ -f "$harness/run.sh" && -f "$harness/pom.xml" ]] || { echo "not a peers harness: $harness" >&2; exit 2; }
rm -rf "$harness/adapter-floor"
cp -r "$here/adapter-floor" "$harness/adapter-floor"
if ! grep -q '<module>adapter-floor</module>' "$harness/pom.xml"; then
  sed -i 's#<module>adapter-ours</module>#<module>adapter-ours</module>\n        <module>adapter-floor</module>#' "$harness/pom.xml"
fi
if ! grep -q 'floor-redis|' "$harness/run.sh"; then
  sed -i 's#^\(    "ours-redis|.*\)$#\1\n    "floor-redis|$HERE/adapter-floor|dev.idempotency.peers.floor.FloorRedisPeer"#' "$harness/run.sh"
fi
echo "floor-redis added to $harness (built with OURS=1)"
