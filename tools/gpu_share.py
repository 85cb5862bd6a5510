#!/usr/bin/env python3
"""Where a grading run's GPU time goes, process by process: runs a command (labgrade, usually), notes every gate
process it starts (its lab and kind: speed, untimed, memcheck or racecheck) and `nvidia-smi pmon`'s per-process SM
share, then adds up GPU-seconds per lab and kind.

  tools/gpu_share.py --out /tmp/share -- build/gpu/labgrade --solutions --no-build
  tools/gpu_share.py --analyse /tmp/share          # the table again, from the recorded files

pmon's SM share of a process is the part of each sample (about a second) in which a kernel of that process ran.
Processes on one GPU take it in time slices, so the shares of one sample add up to at most about 100 %, and a
process whose share is large holds the GPU while the others wait: the grader notes ("Where that minute goes")
found the race checks' processes holding most of the untimed part this way. A process of many short synchronous
launches shows a small share however long it runs: its time is spent waiting for a slice.

The kind comes from the process itself: LABKIT_SANITIZER in its environment (the grader's memcheck and racecheck
runs), else "-speed" in the name of its log (its standard output, or its parents' for lab 09's MPI ranks), else
untimed. Reading another process's environment and descriptors needs its uid (or root): a gate process of a
sandboxed batch shows as kind "?".
Recorded in --out: procs.jsonl (every 0.2 s, the gate processes alive) and pmon.txt (nvidia-smi's output).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict

GATE_EXE = re.compile(r"lab(\d\d)_gates_")


def classify(pid):
    """(lab, kind) of a gate process, or None for any other process."""
    try:
        argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    m = GATE_EXE.search(os.path.basename(argv0))
    if not m:
        return None
    kind = "?"
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        tool = [e[len(b"LABKIT_SANITIZER="):].decode() for e in env if e.startswith(b"LABKIT_SANITIZER=")]
        if tool and tool[0]:
            kind = tool[0]
        else:
            kind = "speed" if "-speed" in os.path.basename(output_file(pid)) else "untimed"
    except OSError:
        pass
    return m.group(1), kind


def output_file(pid, levels=4):
    """The file a process's standard output ends in: its own, or where its parents' goes when its own is a pipe or
    socket (lab 09's ranks write to mpirun, and mpirun to the gate's log). "" when none is found."""
    for _ in range(levels):
        try:
            target = os.readlink(f"/proc/{pid}/fd/1")
            if target.startswith("/"):
                return target
            stat = open(f"/proc/{pid}/stat").read()
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the name, which may hold spaces
        except (OSError, ValueError, IndexError):
            return ""
        if pid <= 1:
            return ""
    return ""


def record(out_dir, command):
    os.makedirs(out_dir, exist_ok=True)
    pmon_out = open(os.path.join(out_dir, "pmon.txt"), "w")
    try:
        pmon = subprocess.Popen(["nvidia-smi", "pmon", "-s", "u", "-d", "1", "-o", "T"], stdout=pmon_out,
                                stderr=subprocess.STDOUT)
    except OSError as e:
        sys.exit(f"gpu_share: cannot start nvidia-smi pmon ({e})")
    procs_out = open(os.path.join(out_dir, "procs.jsonl"), "w")
    known = {}
    t0 = time.time()
    child = subprocess.Popen(command)
    try:
        while child.poll() is None:
            alive = {}
            for name in os.listdir("/proc"):
                if name.isdigit():
                    pid = int(name)
                    c = known.get(pid) or classify(pid)
                    if c:
                        alive[pid] = c
            known = alive  # only the living: a pid can come back as another process
            procs_out.write(json.dumps({"t": round(time.time() - t0, 2),
                                        "procs": [[pid, *c] for pid, c in alive.items()]}) + "\n")
            procs_out.flush()
            time.sleep(0.2)
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        child.wait()
    finally:
        pmon.terminate()
        pmon.wait()
    return child.returncode


def read_pmon(path):
    """pmon's samples, each {pid: SM %}, and the seconds one sample covers (None: unknown). With -o T every line
    starts with the sample's time; a sample also ends where a pid comes round again."""
    samples, cur, stamp, times = [], {}, None, []
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        t = None
        if re.fullmatch(r"\d\d:\d\d:\d\d", f[0]):
            t, f = f[0], f[1:]
            h, m, sec = map(int, t.split(":"))
            if not times or times[-1] != h * 3600 + m * 60 + sec:
                times.append(h * 3600 + m * 60 + sec)
        if len(f) < 4:
            continue
        if cur and (t != stamp or (f[1].isdigit() and int(f[1]) in cur)):
            samples.append(cur)
            cur = {}
        stamp = t
        if f[1].isdigit():  # "-": no process on the GPU in this sample
            cur[int(f[1])] = 0 if f[3] == "-" else int(f[3])
    if cur:
        samples.append(cur)
    interval = None
    if len(times) > 1:
        span = (times[-1] - times[0]) % 86400
        interval = span / (len(times) - 1) if span else None
    return samples, interval


def analyse(out_dir):
    rows = [json.loads(l) for l in open(os.path.join(out_dir, "procs.jsonl")) if l.strip()]
    if not rows:
        sys.exit("gpu_share: no samples in procs.jsonl")
    who, first, last = {}, {}, {}
    for r in rows:
        for pid, lab, kind in r["procs"]:
            who[pid] = (lab, kind)
            first.setdefault(pid, r["t"])
            last[pid] = r["t"]
    samples, interval = read_pmon(os.path.join(out_dir, "pmon.txt"))
    wall = rows[-1]["t"]
    # What one sample covers: from pmon's own times, else the run's length over the samples (nominally 1 s; 1.2 s
    # was seen on an H100 under load).
    dt = interval or (wall / len(samples) if samples else 1.0)
    gpu = defaultdict(float)
    busy = 0.0
    for s in samples:
        busy += min(100, sum(s.values())) / 100 * dt
        for pid, sm in s.items():
            gpu[who.get(pid, ("-", "other"))] += sm / 100 * dt
    span = defaultdict(float)
    count = defaultdict(int)
    for pid, key in who.items():
        span[key] += last[pid] - first[pid]
        count[key] += 1
    print(f"{wall:.1f} s sampled, {len(samples)} pmon samples (about {dt:.2f} s each); the GPU busy {busy:.1f} s")
    print(f"  {'lab':<4} {'kind':<10} {'processes':>9} {'alive s':>8} {'GPU s':>7}")
    keys = sorted(set(gpu) | set(span), key=lambda k: (k[0], k[1]))
    by_kind = defaultdict(float)
    for k in keys:
        print(f"  {k[0]:<4} {k[1]:<10} {count[k]:>9} {span[k]:>8.1f} {gpu[k]:>7.2f}")
        by_kind[k[1]] += gpu[k]
    print("GPU s by kind: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="folder for the recorded files (with a command)")
    p.add_argument("--analyse", metavar="DIR", help="only print the table of an earlier recording")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- and the command to run")
    a = p.parse_args()
    if a.analyse:
        analyse(a.analyse)
        return 0
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not a.out or not command:
        p.error("give --out DIR -- COMMAND..., or --analyse DIR")
    rc = record(a.out, command)
    analyse(a.out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
