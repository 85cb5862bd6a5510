#!/usr/bin/env python3
"""Pivot a bench CSV into a Markdown table: one row per value of --rows, one column per value of --cols, each
cell the median of --value over repeated runs.

  tools/results_table.py docs/results/lab01.csv --rows N --cols variant --value gflops --where case=square
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict


def fmt(v, digits):
    if v >= 1000:
        return f"{v:,.0f}".replace(",", " ")
    return f"{v:.{digits}g}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("--rows", required=True, help="column whose values become table rows")
    p.add_argument("--cols", required=True, help="column whose values become table columns")
    p.add_argument("--value", required=True)
    p.add_argument("--where", action="append", default=[], help="column=value filter (repeatable)")
    p.add_argument("--order", help="comma-separated column order (default: as first seen)")
    p.add_argument("--digits", type=int, default=3)
    a = p.parse_args()
    filters = [w.split("=", 1) for w in a.where]
    cells = defaultdict(list)
    rows, cols = [], []
    with open(a.csv, newline="") as f:
        for r in csv.DictReader(f):
            if any(r.get(k) != v for k, v in filters) or not r.get(a.value):
                continue
            rk, ck = r[a.rows], r[a.cols]
            if rk not in rows:
                rows.append(rk)
            if ck not in cols:
                cols.append(ck)
            cells[(rk, ck)].append(float(r[a.value]))
    if not cells:
        sys.exit(f"{a.csv}: no rows match")
    if a.order:
        cols = [c for c in a.order.split(",") if c in cols]
    print("| " + a.rows + " | " + " | ".join(cols) + " |")
    print("| ---: | " + " | ".join("---:" for _ in cols) + " |")
    for rk in rows:
        vals = [fmt(statistics.median(cells[(rk, c)]), a.digits) if cells.get((rk, c)) else "—" for c in cols]
        print(f"| {rk} | " + " | ".join(vals) + " |")


if __name__ == "__main__":
    main()
