#!/usr/bin/env python3
"""Summarises the per-round tables of benches/kit/compare.sh: per server, the median and the
spread (min-max) of CPU per answered query and of the ratio against the first server (Knot),
and the medians of qps, mean latency, lost queries, RSS, and the CPU per query spent in user
space and in the kernel.

usage: summarize.py FILE   (the tables of every round, concatenated)
"""
import statistics as st
import sys

rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) in (7, 9) and f[0] != "server":
        rows.setdefault(f[0], []).append([float(x) for x in f[1:]])
if not rows:
    sys.exit("no result rows")
w = max(20, *map(len, rows))
print(f"\nsummary over {len(next(iter(rows.values())))} rounds: median [min-max]")
print(f"{'server':<{w}} {'cpu_us/q':>22} {'ratio_vs_knot':>20} {'qps':>10} {'lat_ms':>7} {'lost_pct':>9} {'rss_mb':>7} {'user_us':>7} {'sys_us':>7}")
for name, rs in rows.items():
    col = lambda i: [r[i] for r in rs]
    cpu, ratio = col(1), col(2)
    print(f"{name:<{w}} {st.median(cpu):8.2f} [{min(cpu):.2f}-{max(cpu):.2f}]   {st.median(ratio):6.2f} [{min(ratio):.2f}-{max(ratio):.2f}] "
          f"{st.median(col(0)):10.0f} {st.median(col(3)):7.3f} {st.median(col(4)):9.2f} {st.median(col(5)):7.1f}"
          + (f" {st.median(col(6)):7.2f} {st.median(col(7)):7.2f}" if len(rs[0]) == 8 else ""))
# Our XDP rows against Knot's XDP mode, round by round, when both are there.
if "knot-xdp" in rows:
    for name, rs in rows.items():
        if "xdp" in name and name != "knot-xdp":
            r = [a[1] / b[1] for a, b in zip(rs, rows["knot-xdp"])]
            print(f"{name} / knot-xdp, CPU per query: {st.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]")
# Ours against the floor (benches/floor.c) of the same table, round by round: the share of our
# CPU per query that is ours to cut is 1 - 1/ratio.
for name, rs in rows.items():
    if name.startswith("clusterset-dns") and "xdp" not in name:
        floor = "floor" + name[len("clusterset-dns"):]
        if floor in rows and len(rows[floor]) == len(rs):
            r = [a[1] / b[1] for a, b in zip(rs, rows[floor]) if b[1] > 0]
            k = [a[1] / b[1] for a, b in zip(rows["knot" + name[len("clusterset-dns"):]], rows[floor]) if b[1] > 0] if "knot" + name[len("clusterset-dns"):] in rows else []
            line = f"{name} / {floor}, CPU per query: {st.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]"
            if k:
                line += f"; knot's / floor: {st.median(k):.2f} [{min(k):.2f}-{max(k):.2f}]"
            print(line)
