#!/usr/bin/env python3
"""Summarises run.sh's results.tsv: medians over the rounds, the spread (min-max) and the ratio of
the guarded handler's median requests/s to the plain one's, per stack, store, mode and connections.
Where the floor handler ran (Redis), a second table gives floor/plain and guarded/floor too, and a
third the CPU time per request (application JVM and redis-server, medians over the rounds) of each
handler, with the SDK's own cost: guarded minus floor."""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
with open(sys.argv[1]) as f:
    for line in f:
        stack, store, mode, conns, handler, _round, load, *fields = line.rstrip("\n").split("\t")
        values = dict(field.split("=") for field in fields)
        values = {k: float(v) for k, v in values.items()}
        values["load"] = float(load)
        rows[(stack, store, mode, int(conns), handler)].append(values)

def median(key, runs):
    return statistics.median(r[key] for r in runs)

def spread(key, runs):
    return f"{min(r[key] for r in runs):.0f}-{max(r[key] for r in runs):.0f}"

def checks(key, handlers):
    bad = sum(r["not200"] + r["socket_errors"] for h in handlers for r in rows.get(key + (h,), []))
    wrong = []
    for h in handlers:
        if h == "plain":
            continue
        runs = rows.get(key + (h,), [])
        replayed = sum(r["replayed"] for r in runs)
        requests = sum(r["requests"] for r in runs)
        expected = requests if key[2] == "replay" else 0
        if replayed != expected:
            wrong.append(f"{h} replayed={replayed:.0f}/{requests:.0f}")
    return "ok" if bad == 0 and not wrong else " ".join([f"not200+errors={bad:.0f}"] + wrong)

keys = sorted({k[:4] for k in rows}, key=lambda k: (k[0], k[1] != "memory", k[2], k[3]))

print("| stack | store | mode | conns | plain req/s (spread) | guarded req/s (spread) | ratio "
      "| plain p50/p99 ms | guarded p50/p99 ms | load 1m | checks |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for key in keys:
    plain, guarded = rows.get(key + ("plain",), []), rows.get(key + ("guarded",), [])
    if not plain or not guarded:
        continue
    loads = [r["load"] for r in plain + guarded]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} "
          f"| {median('rps', plain):.0f} ({spread('rps', plain)}) "
          f"| {median('rps', guarded):.0f} ({spread('rps', guarded)}) "
          f"| {median('rps', guarded) / median('rps', plain):.2f} "
          f"| {median('p50_ms', plain):.2f}/{median('p99_ms', plain):.1f} "
          f"| {median('p50_ms', guarded):.2f}/{median('p99_ms', guarded):.1f} "
          f"| {min(loads):.1f}-{max(loads):.1f} | {checks(key, ['plain', 'guarded'])} |")

floor_keys = [k for k in keys if rows.get(k + ("floor",))]
if floor_keys:
    print()
    print("| stack | store | mode | conns | plain / floor / guarded req/s | floor/plain | guarded/plain "
          "| guarded/floor | p50 ms plain / floor / guarded | load 1m | checks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in floor_keys:
        plain, floor, guarded = (rows.get(key + (h,), []) for h in ("plain", "floor", "guarded"))
        if not plain or not guarded:
            continue
        loads = [r["load"] for r in plain + floor + guarded]
        p, fl, g = median("rps", plain), median("rps", floor), median("rps", guarded)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {p:.0f} / {fl:.0f} / {g:.0f} "
              f"| {fl / p:.2f} | {g / p:.2f} | {g / fl:.2f} "
              f"| {median('p50_ms', plain):.2f} / {median('p50_ms', floor):.2f} / "
              f"{median('p50_ms', guarded):.2f} "
              f"| {min(loads):.1f}-{max(loads):.1f} | {checks(key, ['plain', 'floor', 'guarded'])} |")

cpu_keys = [k for k in keys if "app_cpu_us" in (rows.get(k + ("plain",)) or [{}])[0]]
if cpu_keys:
    print()
    print("CPU µs per request (medians over the rounds; spread min-max): application JVM, and "
          "redis-server")
    print()
    print("| stack | store | mode | conns | app plain | app floor | app guarded "
          "| app guarded - floor (SDK) | of which kernel | redis floor | redis guarded |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in cpu_keys:
        cells = {}
        for h in ("plain", "floor", "guarded"):
            runs = rows.get(key + (h,), [])
            cells[h] = runs
        def app(h):
            runs = cells[h]
            if not runs:
                return "-"
            return (f"{median('app_cpu_us', runs):.1f} "
                    f"({min(r['app_cpu_us'] for r in runs):.1f}-{max(r['app_cpu_us'] for r in runs):.1f})")
        def redis(h):
            runs = cells[h]
            return f"{median('redis_cpu_us', runs):.1f}" if runs else "-"
        sdk, kernel = "-", "-"
        if cells["floor"] and cells["guarded"]:
            sdk = f"{median('app_cpu_us', cells['guarded']) - median('app_cpu_us', cells['floor']):.1f}"
            if "app_sys_us" in cells["guarded"][0]:
                kernel = (f"{median('app_sys_us', cells['guarded']) - median('app_sys_us', cells['floor']):.1f}")
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {app('plain')} | {app('floor')} "
              f"| {app('guarded')} | {sdk} | {kernel} | {redis('floor')} | {redis('guarded')} |")
