#!/usr/bin/env python3
"""Plots of the lab 07 bench CSV: time per call / per iteration vs n, and the fraction of the bandwidth bound.
   python3 plot_cg.py lab07_bench.csv [--out lab07_bench.png]"""
import argparse
import csv
from collections import defaultdict
from statistics import median

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--out", default="lab07_bench.png")
    a = ap.parse_args()
    ms, frac = defaultdict(list), defaultdict(list)
    cases = {}
    with open(a.csv) as f:
        for row in csv.DictReader(f):
            key = (row["case"], row["variant"], int(row["n"]))
            ms[key].append(float(row["median_ms"]))
            frac[key].append(float(row["bound_fraction"]))
            cases.setdefault(row["case"], set()).add(row["variant"])
    order = [c for c in ("dot", "update", "spmv", "iteration") if c in cases]
    fig, axes = plt.subplots(2, len(order), figsize=(4.5 * len(order), 8), squeeze=False)
    for col, case in enumerate(order):
        for variant in sorted(cases[case]):
            ns = sorted(n for (c, v, n) in ms if c == case and v == variant)
            axes[0][col].loglog(ns, [median(ms[(case, variant, n)]) for n in ns], "o-", label=variant)
            axes[1][col].semilogx(ns, [median(frac[(case, variant, n)]) for n in ns], "o-", label=variant)
        axes[0][col].set_title(case + (" (per iteration)" if case == "iteration" else " (per call)"))
        axes[0][col].set_ylabel("ms")
        axes[1][col].set_ylabel("fraction of memcpy-bandwidth bound")
        axes[1][col].set_xlabel("rows n (2D Poisson)")
        axes[1][col].axhline(1.0, color="gray", lw=0.5)
        axes[0][col].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
