#!/usr/bin/env python3
"""Summarise a LABKIT_GATE_TRACE file: where the gates' time goes, per lab and tool, per gate, and the costliest
cases.

  LABKIT_GATE_TRACE=/tmp/trace.jsonl build/gpu/labgrade --solutions --no-build
  tools/gate_trace.py /tmp/trace.jsonl                  # every lab, plain run and each sanitizer
  tools/gate_trace.py /tmp/trace.jsonl --tool racecheck --top 15
  tools/gate_trace.py /tmp/trace.jsonl --timeline       # which gate processes ran when, on one clock

Each line of the trace is one gate::require (one checked case, mostly), or the start or end of compare_speed's timed
calls: {"lab", "pid", "gate", "context", "ok", "ms", "sanitizer", "t"}, where ms is the time since the gate began or
since the previous line of the same process and t the wall clock (seconds; traces written before it was added have
none). A gate's time after its last line (teardown) is not in the trace; the grader's per-gate times (its JUnit or
JSON output) have it.
"""
import argparse
import json
import sys
from collections import defaultdict


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--tool", help="only this sanitizer ('none' for the plain run)")
    p.add_argument("--lab", help="only this lab, e.g. 01")
    p.add_argument("--top", type=int, default=10, help="how many of the costliest cases to list (default 10)")
    p.add_argument("--timeline", action="store_true",
                   help="one line per gate process (lab, tool): from its first traced case to its last, "
                        "on the run's clock")
    a = p.parse_args()

    rows = []
    with open(a.trace) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{a.trace}:{number}: not a JSON line ({e.msg})")
            r["tool"] = r.get("sanitizer") or "none"
            r["lab"] = r.get("lab") or "?"
            rows.append(r)
    if a.tool:
        rows = [r for r in rows if r["tool"] == a.tool]
    if a.lab:
        rows = [r for r in rows if r["lab"] == a.lab]
    if not rows:
        sys.exit("no trace lines match")

    if a.timeline:
        timeline(rows)
        return

    by_tool = defaultdict(float)
    by_gate = defaultdict(lambda: [0.0, 0])
    for r in rows:
        by_tool[(r["lab"], r["tool"])] += r["ms"]
        g = by_gate[(r["lab"], r["tool"], r["gate"])]
        g[0] += r["ms"]
        g[1] += 1

    print("seconds per lab and tool")
    print(f"  {'lab':<4} {'tool':<10} {'s':>8}")
    for (lab, tool), ms in sorted(by_tool.items()):
        print(f"  {lab:<4} {tool:<10} {ms / 1000:8.2f}")
    print("\nseconds per gate (cases traced)")
    print(f"  {'lab':<4} {'tool':<10} {'gate':<22} {'s':>8} {'cases':>6}")
    for (lab, tool, gate), (ms, n) in sorted(by_gate.items()):
        print(f"  {lab:<4} {tool:<10} {gate:<22} {ms / 1000:8.2f} {n:6d}")
    print(f"\nthe {a.top} costliest lines")
    for r in sorted(rows, key=lambda r: -r["ms"])[: a.top]:
        print(f"  {r['ms'] / 1000:7.2f} s  {r['lab']:<3} {r['tool']:<10} {r['gate']:<20} {r['context'][:90]}")


def timeline(rows):
    """Each process's span: from its first line's start (t - ms) to its last line, in seconds from the first start,
    and how many processes were running at each second (a bar), to see which labs and checks overlapped."""
    rows = [r for r in rows if "t" in r]
    if not rows:
        sys.exit("the trace has no wall-clock times (\"t\"): written by an older labkit")
    spans = {}
    for r in rows:
        key = r["pid"]
        begin, end = r["t"] - r["ms"] / 1000, r["t"]
        if key in spans:
            s = spans[key]
            s[0], s[1] = min(s[0], begin), max(s[1], end)
        else:
            spans[key] = [begin, end, r["lab"], r["tool"]]
    t0 = min(s[0] for s in spans.values())
    t1 = max(s[1] for s in spans.values())
    print(f"  {'from':>6} {'to':>6} {'s':>6}  {'lab':<4} {'tool':<10} pid")
    for pid, (b, e, lab, tool) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        print(f"  {b - t0:6.1f} {e - t0:6.1f} {e - b:6.1f}  {lab:<4} {tool:<10} {pid}")
    print("\nprocesses running, per second")
    for sec in range(int(t1 - t0) + 1):
        at = [s for s in spans.values() if s[0] - t0 <= sec + 0.5 < s[1] - t0]
        print(f"  {sec:4d} {len(at):3d} " + " ".join(sorted(f"{s[2]}{s[3][0]}" for s in at)))


if __name__ == "__main__":
    main()
