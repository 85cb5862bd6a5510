#!/usr/bin/env python3
"""Run the speed gates of every built lab several times and report, per gate, the ratio's median, its range and
spread over the runs, and the gate's median time: the figures a change to a speed gate (its timing budget, its
checks) is judged by, before and after, on one machine.

  tools/speed_spread.py                              # build/gpu, the solution tree's gate binaries, 5 runs
  tools/speed_spread.py --runs 3 --lab 01 --lab 06   # some labs only
  tools/speed_spread.py --tree student --json runs.json

Each run starts every lab's gate binary once with the Catch2 filter "[speed]" and its result channel in a file
(--labkit-results); the ratio is the metric each speed gate reports ("ratio"), the time the gate_end event's.
Needs a GPU. A gate that did not pass in some run is listed with its statuses.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def lab_binaries(root, build, tree, only):
    for d in sorted((root / "labs").iterdir()):
        if not d.is_dir() or not d.name[:2].isdigit() or (only and d.name[:2] not in only):
            continue
        exe = build / "labs" / d.name / f"lab{d.name[:2]}_gates_{tree}"
        if exe.is_file():
            yield d.name[:2], exe, d / "rubric.toml"


def read_events(path):
    lab, out = "?", []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line a crashing binary left half-written
        if e.get("event") == "run_start":
            lab = e.get("lab", lab)
        out.append((lab, e))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build/gpu", help="the build folder (default build/gpu)")
    p.add_argument("--tree", default="solution", choices=["solution", "student"])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--lab", action="append", help="only this lab (01, 02, ...); may be repeated")
    p.add_argument("--json", help="write every run's ratios and times here")
    a = p.parse_args()
    if a.runs < 1:
        sys.exit("--runs must be at least 1")
    root = Path(__file__).resolve().parent.parent
    build = Path(a.build) if Path(a.build).is_absolute() else root / a.build
    labs = list(lab_binaries(root, build, a.tree, set(a.lab or [])))
    if not labs:
        sys.exit(f"no lab gate binaries ({a.tree} tree) under {build}/labs: build first (cmake --workflow --preset gpu)")
    ratio, secs, status = defaultdict(list), defaultdict(list), defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="speed_spread.") as tmp:
        for run in range(1, a.runs + 1):
            t0 = time.monotonic()
            for lab, exe, rubric in labs:
                results = Path(tmp) / f"run{run}-lab{lab}.jsonl"
                with open(Path(tmp) / f"run{run}-lab{lab}.log", "w") as log:
                    subprocess.run([str(exe), "--labkit-rubric", str(rubric), "--labkit-results", str(results),
                                    "[speed]"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
                for lab_id, e in read_events(results):
                    gate = f'{lab_id} {e.get("gate")}'
                    if e.get("event") == "metric" and e.get("name") == "ratio":
                        ratio[gate].append(e["value"])
                    elif e.get("event") == "gate_end":
                        secs[gate].append(e.get("seconds", 0.0))
                        status[gate].append(e.get("status", "?"))
            print(f"run {run} of {a.runs}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    print(f"{'gate':30s} {'ratio median':>12s} {'min':>8s} {'max':>8s} {'spread':>7s} {'seconds':>8s}")
    total = 0.0
    for gate in secs:
        s = statistics.median(secs[gate])
        total += s
        r = ratio.get(gate, [])
        if r:
            m = statistics.median(r)
            spread = 100 * (max(r) - min(r)) / m if m else 0.0
            cols = f"{m:12.4f} {min(r):8.4f} {max(r):8.4f} {spread:6.1f}%"
        else:
            cols = f"{'-':>12s} {'':8s} {'':8s} {'':7s}"
        bad = [x for x in status[gate] if x != "passed"]
        print(f"{gate:30s} {cols} {s:8.2f}" + (f"   not passed: {bad}" if bad else ""))
    print(f"{'sum of the gates median times':30s} {'':38s} {total:8.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "tree": a.tree, "ratio": ratio, "seconds": secs, "status": status}, f, indent=1)


if __name__ == "__main__":
    main()
