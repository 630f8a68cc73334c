#!/usr/bin/env python3
"""Summarises run.sh's results.tsv: medians over the rounds, the spread (min-max) and the ratio of
the guarded handler's median requests/s to the plain one's, per stack, store, mode and connections."""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
with open(sys.argv[1]) as f:
    for line in f:
        stack, store, mode, conns, handler, _round, load, *fields = line.split("\t")
        values = dict(field.split("=") for field in fields)
        values = {k: float(v) for k, v in values.items()}
        values["load"] = float(load)
        rows[(stack, store, mode, int(conns), handler)].append(values)

def median(key, runs):
    return statistics.median(r[key] for r in runs)

def spread(key, runs):
    return f"{min(r[key] for r in runs):.0f}-{max(r[key] for r in runs):.0f}"

print("| stack | store | mode | conns | plain req/s (spread) | guarded req/s (spread) | ratio "
      "| plain p50/p99 ms | guarded p50/p99 ms | load 1m | checks |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for key in sorted({k[:4] for k in rows}, key=lambda k: (k[0], k[1] != "memory", k[2], k[3])):
    plain, guarded = rows.get(key + ("plain",), []), rows.get(key + ("guarded",), [])
    if not plain or not guarded:
        continue
    loads = [r["load"] for r in plain + guarded]
    bad = sum(r["not200"] + r["socket_errors"] for r in plain + guarded)
    replayed = sum(r["replayed"] for r in guarded)
    requests = sum(r["requests"] for r in guarded)
    expected = requests if key[2] == "replay" else 0
    checks = "ok" if bad == 0 and replayed == expected else f"not200+errors={bad:.0f} replayed={replayed:.0f}/{requests:.0f}"
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} "
          f"| {median('rps', plain):.0f} ({spread('rps', plain)}) "
          f"| {median('rps', guarded):.0f} ({spread('rps', guarded)}) "
          f"| {median('rps', guarded) / median('rps', plain):.2f} "
          f"| {median('p50_ms', plain):.2f}/{median('p99_ms', plain):.1f} "
          f"| {median('p50_ms', guarded):.2f}/{median('p99_ms', guarded):.1f} "
          f"| {min(loads):.1f}-{max(loads):.1f} | {checks} |")
