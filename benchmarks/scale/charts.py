#!/usr/bin/env python3
"""Charts for BENCHMARKS.md and docs/performance.md from the benchmarks' JSON lines (Python 3 stdlib only).

    python3 benchmarks/scale/charts.py --peers PEERS.jsonl --scale SCALE.jsonl \
        [--update BENCHMARKS.md docs/performance.md README.md]

--peers   the peers harness's results/<timestamp>.jsonl (one line per peer, T and round)
--scale   ScaleBench's json=FILE output (pg-latency, redis-latency, pg-size, ...)
--update  rewrites, in each file, what stands between <!-- chart:ID --> and <!-- /chart:ID -->
          (IDs: peers-ratios, pg-size-latency, redis-size-latency, and the same with -table);
          without it, prints every block.

Charts are Mermaid `xychart-beta` blocks, which GitHub renders where the Markdown is read; each
has a table beside it with the same figures, for readers that do not render Mermaid.
"""
import argparse
import json
import re
import statistics
import sys
from collections import defaultdict


def read_lines(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def fmt(x, digits=2):
    return f"{x:.{digits}f}"


def mermaid_bars(title, labels, values, y_label, target=None, y_max=None):
    top = y_max or max(values + ([max(target)] if target else [])) * 1.15
    out = ["```mermaid", "xychart-beta", f'    title "{title}"']
    out.append("    x-axis [" + ", ".join(f'"{l}"' for l in labels) + "]")
    out.append(f'    y-axis "{y_label}" 0 --> {fmt(top, 1)}')
    out.append("    bar [" + ", ".join(fmt(v) for v in values) + "]")
    if target:
        out.append("    line [" + ", ".join(fmt(v) for v in target) + "]")
    out.append("```")
    return "\n".join(out)


# ---------------------------------------------------------------- the peers harness

PEER_PAIRS = [  # (store, ours, theirs, pass, target at T=1, target at T=16)
    ("PostgreSQL", "ours-jdbc", "camel-jdbc", "first", 1.0, 1.0),
    ("PostgreSQL", "ours-jdbc", "camel-jdbc", "replay", 1.2, 1.2),
    ("Redis", "ours-redis", "camel-redis", "replay", 0.95, 1.0),
    ("Redis", "ours-redis", "floor-redis", "first", 0.9, 0.9),
]


def peers_ratios(rows):
    """Median over rounds of the per-round ratio ours / theirs, ops/s, per pair, pass and T."""
    by = {}
    for r in rows:
        if "failed" in r:
            continue
        by[(r["peer"], int(r["threads"]), int(r.get("round", 0)))] = r
    result = []
    threads = sorted({k[1] for k in by})
    for store, ours, theirs, pass_, t1, t16 in PEER_PAIRS:
        for t in threads:
            ratios = []
            for (peer, tt, rnd), r in by.items():
                if peer == ours and tt == t and (theirs, t, rnd) in by:
                    mine = float(r[f"{pass_}_ops_s"])
                    other = float(by[(theirs, t, rnd)][f"{pass_}_ops_s"])
                    if other > 0:
                        ratios.append(mine / other)
            if ratios:
                label = f"{store} {pass_} T={t} / {theirs}"
                result.append((label, statistics.median(ratios), t1 if t == 1 else t16, len(ratios)))
    return result


def short_label(label):
    """"PostgreSQL first T=1 / camel-jdbc" as "PG first T=1 vs Camel", for the chart's axis."""
    store, rest = label.split(" ", 1)
    ours, theirs = rest.split(" / ")
    peer = "floor" if theirs.startswith("floor") else "Camel"
    return f"{'PG' if store == 'PostgreSQL' else store} {ours} vs {peer}"


def peers_blocks(rows):
    ratios = peers_ratios(rows)
    if not ratios:
        return {}
    labels = [short_label(r[0]) for r in ratios]
    chart = mermaid_bars(
        "Ours against the peers: ops/s ratio (bars) and target (line)",
        labels,
        [r[1] for r in ratios],
        "ours / peer",
        target=[r[2] for r in ratios],
    )
    table = ["| # | ratio of ops/s | median | target | rounds |", "|---|---|---|---|---|"]
    for i, (label, ratio, target, n) in enumerate(ratios):
        table.append(f"| {i + 1} | {label} | {fmt(ratio)} | {fmt(target)} | {n} |")
    return {"peers-ratios": chart, "peers-ratios-table": "\n".join(table)}


# ---------------------------------------------------------------- latency against size

def size_label(n):
    n = int(n)
    if n >= 1_000_000:
        return f"{round(n / 1_000_000, 1):g}M"
    if n >= 1_000:
        return f"{round(n / 1_000):g}k"
    return str(n)


def size_blocks(rows, step, chart_id, what, target):
    """Per thread count and pass, the medians over rounds of p50 and p99, and big / small."""
    cells = defaultdict(list)
    sizes = {}
    for r in rows:
        if r.get("step") != step or int(r.get("round", -1)) < 0:
            continue
        if int(r.get("errors", 0)) > 0:  # a pass with errors measured something else too
            continue
        sizes[r["target"]] = int(r["size"])
        cells[(r["target"], int(r["threads"]), r["pass"])].append(r)
    if len(sizes) < 2:
        return {}
    small, big = sorted(sizes, key=lambda k: sizes[k])[0], sorted(sizes, key=lambda k: sizes[k])[-1]
    labels, values, table = [], [], []
    table.append(
        f"| T | pass | p50 µs, {size_label(sizes[small])} | p50 µs, {size_label(sizes[big])}"
        f" | p99 µs, {size_label(sizes[small])} | p99 µs, {size_label(sizes[big])}"
        " | p50 ratio | p99 ratio | rounds | load (1 min) |"
    )
    table.append("|---|---|---|---|---|---|---|---|---|---|")
    for (name, t, pass_) in sorted(cells, key=lambda k: (k[1], k[2])):
        if name != small or (big, t, pass_) not in cells:
            continue
        a, b = cells[(small, t, pass_)], cells[(big, t, pass_)]
        p50a = statistics.median(float(x["p50_us"]) for x in a)
        p50b = statistics.median(float(x["p50_us"]) for x in b)
        p99a = statistics.median(float(x["p99_us"]) for x in a)
        p99b = statistics.median(float(x["p99_us"]) for x in b)
        loads = sorted(float(x["load1"]) for x in a + b if str(x.get("load1", "")).replace(".", "").isdigit())
        load = f"{fmt(loads[0], 1)}-{fmt(loads[-1], 1)}" if loads else "?"
        table.append(
            f"| {t} | {pass_} | {fmt(p50a, 0)} | {fmt(p50b, 0)} | {fmt(p99a, 0)} | {fmt(p99b, 0)}"
            f" | {fmt(p50b / p50a)} | {fmt(p99b / p99a)} | {min(len(a), len(b))} | {load} |"
        )
        labels += [f"{pass_} p50 T={t}", f"{pass_} p99 T={t}"]
        values += [p50b / p50a, p99b / p99a]
    chart = mermaid_bars(
        f"{what}: latency at {size_label(sizes[big])} / at {size_label(sizes[small])}"
        f" (bars), target (line)",
        labels,
        values,
        "ratio",
        target=[target] * len(values),
    )
    return {chart_id: chart, chart_id + "-table": "\n".join(table)}


def update(path, blocks):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    changed = 0
    for name, block in blocks.items():
        pattern = re.compile(
            r"(<!-- chart:" + re.escape(name) + r" -->\n)(?:.*?\n)?(<!-- /chart:" + re.escape(name) + r" -->)",
            re.S,
        )
        text, n = pattern.subn(lambda m: m.group(1) + block + "\n" + m.group(2), text)
        changed += n
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{path}: {changed} block(s) updated")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", action="append", default=[])
    parser.add_argument("--scale", action="append", default=[])
    parser.add_argument("--update", nargs="*", default=[])
    args = parser.parse_args()
    blocks = {}
    peers = [r for p in args.peers for r in read_lines(p)]
    scale = [r for p in args.scale for r in read_lines(p)]
    if peers:
        blocks.update(peers_blocks(peers))
    if scale:
        blocks.update(size_blocks(scale, "pg-latency", "pg-size-latency", "PostgreSQL", 1.3))
        blocks.update(size_blocks(scale, "redis-latency", "redis-size-latency", "Redis", 1.2))
    if not blocks:
        sys.exit("no figures found in the given files")
    if args.update:
        for path in args.update:
            update(path, blocks)
    else:
        for name, block in blocks.items():
            print(f"<!-- chart:{name} -->\n{block}\n<!-- /chart:{name} -->\n")


if __name__ == "__main__":
    main()
