#!/usr/bin/env python3
"""GB/s of every lab 02 variant vs matrix size (square cases), from the bench CSV.
usage: plot_transpose.py lab02.csv [out.png]"""
import csv, statistics, sys
from collections import defaultdict

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
series = defaultdict(lambda: defaultdict(list))
for r in rows:
    if r["case"] == "square":
        series[r["variant"]][int(r["rows"])].append(float(r["gbs"]))
fig, ax = plt.subplots(figsize=(7, 4.5))
for variant, pts in sorted(series.items()):
    n = sorted(pts)
    ax.plot(n, [statistics.median(pts[k]) for k in n], marker="o", label=variant)
ax.set_xscale("log", base=2)
ax.set_xlabel("n (n x n floats)")
ax.set_ylabel("effective bandwidth, GB/s (read + write)")
ax.set_title("Lab 02: transpose vs copy")
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2] if len(sys.argv) > 2 else "lab02.png", dpi=120)
