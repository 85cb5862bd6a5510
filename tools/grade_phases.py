#!/usr/bin/env python3
"""Where a labgrade run's time went, per lab and phase, for one run or several side by side (before and after a
change, on one machine):

  build/gpu/labgrade --solutions --no-build --junit before.xml 2> before.txt
  ... the change, rebuilt ...
  build/gpu/labgrade --solutions --no-build --junit after.xml 2> after.txt
  tools/grade_phases.py before.xml after.xml

Columns per run: the correctness and cpu gates' time and the speed gates' (from the JUnit file: each gate's time in
the graded run), then, from labgrade's console lines in the .txt beside each XML (what it writes to stderr, when
there is one), the default checks' memcheck and racecheck times (the two run at once: the lab pays the longer) and
the lab's whole run. The line "sum" adds up the labs, "tot" is the run's total from labgrade's "total" line.
"""
import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

COLUMNS = ["correct", "speed", "memcheck", "racecheck", "run"]
SPEED = re.compile(r"speed|sweep|memcpy")


def read_run(xml):
    phases = defaultdict(float)
    text = Path(xml).read_text()
    for m in re.finditer(r'<testcase classname="lab(\d+)" name="([^"]*)" time="([0-9.]+)"', text):
        phases[(m.group(1), "speed" if SPEED.search(m.group(2)) else "correct")] += float(m.group(3))
    total = None
    console = Path(xml).with_suffix(".txt")
    if console.is_file():
        lab = None
        for line in console.read_text().splitlines():
            m = re.match(r"labgrade: lab (\d+): .*\(run (?:(\d+) min )?([0-9.]+) s\)", line)
            if m:
                lab = m.group(1)
                phases[(lab, "run")] = int(m.group(2) or 0) * 60 + float(m.group(3))
                continue
            m = re.match(r"labgrade:\s+(memcheck|racecheck): \d+ gate\(s\) checked in ([0-9.]+) s", line)
            if m and lab:
                phases[(lab, m.group(1))] = float(m.group(2))
        m = re.search(r"^total .*run (?:(\d+) min )?([0-9.]+) s\)", console.read_text(), re.M)
        if m:
            total = int(m.group(1) or 0) * 60 + float(m.group(2))
    return phases, total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("junit", nargs="+", help="labgrade --junit files, a console .txt beside each where there is one")
    a = p.parse_args()
    runs = []
    for x in a.junit:
        if not Path(x).is_file():
            sys.exit(f"{x}: no such file")
        runs.append((Path(x).stem, *read_run(x)))
    labs = sorted({lab for _, phases, _ in runs for lab, _ in phases})
    width = 9 * len(COLUMNS)
    print("lab " + "".join(f"  {name[:width]:>{width}s}" for name, _, _ in runs))
    print("    " + "".join("  " + "".join(f"{c[:8]:>9s}" for c in COLUMNS) for _ in runs))
    for lab in labs:
        print(f"{lab:4s}" + "".join("  " + "".join(f"{ph[(lab, c)]:9.1f}" for c in COLUMNS) for _, ph, _ in runs))
    print("sum " + "".join("  " + "".join(f"{sum(ph[(l, c)] for l in labs):9.1f}" for c in COLUMNS) for _, ph, _ in runs))
    # labgrade's own total for the run (its "total" line), under the run column
    print("tot " + "".join(f"  {'' if t is None else f'{t:.1f}':>{width}s}" for _, _, t in runs))


if __name__ == "__main__":
    main()
