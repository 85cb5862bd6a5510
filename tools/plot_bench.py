#!/usr/bin/env python3
"""Plot a lab bench CSV: one line per series (e.g. variant), y against x, median over repeated runs.

  tools/plot_bench.py docs/results/lab01.csv --x N --y gflops --series variant --where case=square \
      --title "Lab 01: SGEMM on H100" --ylabel "GFLOP/s" --logx --out docs/results/lab01.png
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--series", required=True)
    p.add_argument("--where", action="append", default=[], help="column=value filter (repeatable)")
    p.add_argument("--title", default="")
    p.add_argument("--xlabel")
    p.add_argument("--ylabel")
    p.add_argument("--logx", action="store_true")
    p.add_argument("--logy", action="store_true")
    p.add_argument("--hline", type=float, action="append", default=[], help="reference line (e.g. a ceiling)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    filters = [w.split("=", 1) for w in a.where]
    data = defaultdict(lambda: defaultdict(list))
    with open(a.csv, newline="") as f:
        for row in csv.DictReader(f):
            if any(row.get(k) != v for k, v in filters):
                continue
            try:
                data[row[a.series]][float(row[a.x])].append(float(row[a.y]))
            except (KeyError, ValueError):
                continue
    if not data:
        sys.exit(f"{a.csv}: no rows match {a.where}")
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    # The default cycle has 10 colours: more series (lab 01 has 13) would repeat them, so take tab20's instead and
    # vary the marker too.
    colors = plt.get_cmap("tab20" if len(data) > 10 else "tab10").colors
    markers = "osD^v<>"
    for i, name in enumerate(sorted(data)):
        xs = sorted(data[name])
        ax.plot(xs, [statistics.median(data[name][x]) for x in xs], marker=markers[i % len(markers)],
                color=colors[i % len(colors)], label=name)
    for h in a.hline:
        ax.axhline(h, color="gray", linestyle="--", linewidth=1)
    if a.logx:
        ax.set_xscale("log", base=2)
    if a.logy:
        ax.set_yscale("log")
    ax.set_xlabel(a.xlabel or a.x)
    ax.set_ylabel(a.ylabel or a.y)
    ax.set_title(a.title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
