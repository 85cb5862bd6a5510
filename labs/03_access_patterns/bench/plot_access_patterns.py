#!/usr/bin/env python3
"""The three lab 03 figures from the bench CSV: GB/s vs offset, vs stride, and the transpose size sweep with the
flagged dips marked.  usage: plot_access_patterns.py lab03.csv [out.png]"""
import csv, statistics, sys
from collections import defaultdict

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
for ax, case, variant, xlabel in ((axes[0], "offset", "copy_offset", "offset (floats)"),
                                  (axes[1], "stride", "copy_strided", "stride (floats)")):
    pts = defaultdict(list)
    memcpy = [float(r["gbs"]) for r in rows if r["case"] == case and r["variant"] == "memcpy_d2d"]
    for r in rows:
        if r["case"] == case and r["variant"] == variant:
            pts[int(r["param"])].append(float(r["gbs"]))
    x = sorted(pts)
    ax.plot(x, [statistics.median(pts[k]) for k in x], marker="o", label=variant)
    if memcpy:
        ax.axhline(statistics.median(memcpy), color="gray", ls="--", label="cudaMemcpy D2D")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s (useful bytes read + written)")
    ax.set_title(case)
    ax.grid(True, alpha=0.3)
    ax.legend()
ax = axes[2]
for variant in ("rowmajor", "diagonal"):
    pts, dip = defaultdict(list), {}
    for r in rows:
        if r["case"] == "sweep" and r["variant"] == variant:
            pts[int(r["param"])].append(float(r["gbs"]))
            dip[int(r["param"])] = r["dip"] == "1"
    x = sorted(pts)
    y = [statistics.median(pts[k]) for k in x]
    line, = ax.plot(x, y, marker=".", label=variant)
    ax.scatter([k for k in x if dip[k]], [v for k, v in zip(x, y) if dip[k]], s=80, facecolors="none",
               edgecolors=line.get_color(), label=variant + " dip")
ax.set_xlabel("n (n x n floats)")
ax.set_ylabel("GB/s (read + write)")
ax.set_title("transpose: row-major vs diagonal block order")
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2] if len(sys.argv) > 2 else "lab03.png", dpi=120)
