#!/usr/bin/env python3
"""Regenerate the measured-results tables of the documentation from the bench CSVs.

Reads docs/results/labNN.csv (written by build/gpu/labs/*/labNN_bench_solution --csv FILE) and
docs/results/meta.json (the GPU, driver, toolkit, date, commit and bench mode of each lab's CSV), and rewrites, in
place, only the generated regions of docs/reference-results.md and of each lab's README:

    <!-- results:lab02 -->            a lab's first region (a caption naming GPU, driver, toolkit, date and bench
    ...generated...                   mode, then the table(s))
    <!-- /results:lab02 -->
    <!-- results:lab03:stride -->     further regions of a lab, where prose sits between its tables
    ...generated...
    <!-- /results:lab03:stride -->
    <!-- results:meta -->             the header table of reference-results.md
    ...generated...
    <!-- /results:meta -->

Everything outside the markers is left byte for byte as it is. Every cell is the median over the CSV's `run`
repeats; what each lab's tables show is in tools/results_tables.py. A lab without a CSV keeps its regions as they are. Then the figures docs/results/*.png are redrawn with
tools/plot_bench.py when matplotlib can be imported (skip with --no-plots).

    tools/reference_results.py                 # rewrite the regions and redraw the plots
    tools/reference_results.py --check         # exit 1 and print a diff when the docs are not what the CSVs give

tools/reference-results.sh runs the benches on a GPU machine and then this script; it records each lab's run
with --record NN=BENCH_LOG and --meta KEY=VALUE (driver, toolkit, date, commit, mode).
Standard library only (matplotlib only for the plots).
"""
import argparse
import difflib
import glob
import json
import os
import re
import subprocess
import sys
from collections import OrderedDict

from results_tables import GENERATORS, Bench, table  # what each lab's tables show (tools/results_tables.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABS = ["01", "02", "03", "04", "05", "06", "07"]
START = re.compile(r"^<!-- results:(lab\d\d(?::[\w-]+)?|meta) -->\s*$")
END = re.compile(r"^<!-- /results:(lab\d\d(?::[\w-]+)?|meta) -->\s*$")


# The figures the docs show, drawn by tools/plot_bench.py ({gpu}: the GPU's name without "NVIDIA ").
PLOTS = [
    ("01", "lab01.png", ["--x", "N", "--y", "gflops", "--series", "variant", "--where", "case=square", "--logx",
                         "--logy", "--xlabel", "M = N = K", "--ylabel", "GFLOP/s",
                         "--title", "Lab 01: C += A*B (fp32), {gpu}"]),
    ("02", "lab02.png", ["--x", "rows", "--y", "gbs", "--series", "variant", "--where", "case=square", "--logx",
                         "--xlabel", "n", "--ylabel", "GB/s (read + write)",
                         "--title", "Lab 02: transpose, square n x n floats, {gpu}"]),
    ("03", "lab03_stride.png", ["--x", "param", "--y", "gbs", "--series", "variant", "--where", "case=stride",
                                "--xlabel", "stride (floats)", "--ylabel", "GB/s (useful bytes)",
                                "--title", "Lab 03: strided copy, {gpu}"]),
    ("03", "lab03_sweep.png", ["--x", "param", "--y", "gbs", "--series", "variant", "--where", "case=sweep",
                               "--xlabel", "n (n x n)", "--ylabel", "GB/s",
                               "--title", "Lab 03: transpose sweep, row-major vs diagonal order, {gpu}"]),
    ("05", "lab05.png", ["--x", "n", "--y", "gbs", "--series", "variant", "--where", "case=saxpy", "--logx",
                         "--xlabel", "n (floats)", "--ylabel", "GB/s (12 bytes per element)",
                         "--title", "Lab 05: saxpy, {gpu}"]),
    ("07", "lab07.png", ["--x", "n", "--y", "median_ms", "--series", "variant", "--where", "case=iteration",
                         "--logx", "--logy", "--xlabel", "rows", "--ylabel", "ms per iteration",
                         "--title", "Lab 07: one CG iteration, 2D Poisson, {gpu}"]),
]


# ---------------------------------------------------------------------------------------------------- metadata

def group_labs(values):
    """{lab: text} -> 'text' when all agree, else 'labs 01, 04: text1; labs 02, 03, 05–07: text2'."""
    by = OrderedDict()
    for lab in sorted(values):
        by.setdefault(values[lab], []).append(lab)
    if len(by) == 1:
        return next(iter(by))
    parts = []
    for text, labs in by.items():
        runs, cur = [], [labs[0]]
        for lab in labs[1:]:
            if int(lab) == int(cur[-1]) + 1:
                cur.append(lab)
            else:
                runs.append(cur)
                cur = [lab]
        runs.append(cur)
        names = ", ".join(r[0] if len(r) == 1 else (f"{r[0]}, {r[1]}" if len(r) == 2 else f"{r[0]}–{r[-1]}")
                          for r in runs)
        parts.append(f"{'lab' if len(labs) == 1 else 'labs'} {names}: {text}")
    return "; ".join(parts)


def meta_table(meta, labs):
    def field(fn):
        return group_labs({lab: (fn(meta[lab]) if lab in meta else "not recorded") for lab in labs})

    def gpu(m):
        extra = [f"{m['sms']} SMs" if m.get("sms") else "",
                 f"compute capability {m['compute_capability']}" if m.get("compute_capability") else ""]
        extra = ", ".join(e for e in extra if e)
        return m.get("gpu", "unknown") + (f" ({extra})" if extra else "")

    mode = {"full": "full sweeps", "quick": "`--quick` (shorter sweeps, one run; not for publication)"}
    rows = [["GPU", field(gpu)], ["driver", field(lambda m: m.get("driver", "unknown"))],
            ["CUDA toolkit", field(lambda m: m.get("toolkit", "unknown"))],
            ["date", field(lambda m: m.get("date", "unknown"))],
            ["commit", field(lambda m: m.get("commit", "unknown"))],
            ["bench", field(lambda m: mode.get(m.get("mode"), m.get("mode", "unknown")))]]
    return table(["", ""], ["---", "---"], rows)


def load_meta(path):
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("labs", {})


def save_meta(path, labs_meta):
    text = json.dumps({"labs": OrderedDict(sorted(labs_meta.items()))}, indent=2, ensure_ascii=False) + "\n"
    write_if_changed(path, text)


def device_from_log(path):
    """The device line every bench prints first: 'lab01 bench on NAME (sm_90, 132 SMs, 81559 MiB, driver ...)'."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return {}
    m = re.search(r"^lab\d\d bench on (.+?) \(sm_(\d+)(\d), (\d+) SMs", text, re.M)
    if not m:
        return {}
    return {"gpu": m.group(1), "compute_capability": f"{m.group(2)}.{m.group(3)}", "sms": int(m.group(4))}


def record(meta_path, records, settings):
    labs_meta = load_meta(meta_path)
    for rec in records:
        lab, _, log = rec.partition("=")
        lab = f"{int(lab):02d}"
        entry = {k: v for k, v in settings.items() if v != ""}
        found = device_from_log(log) if log else {}
        for k in ("gpu", "compute_capability"):  # from nvidia-smi, used only when the bench's own line is missing
            if k in found:
                entry[k] = found[k]
        if "sms" in found:
            entry["sms"] = found["sms"]
        order = ["gpu", "sms", "compute_capability", "driver", "toolkit", "date", "commit", "mode"]
        labs_meta[lab] = OrderedDict(sorted(entry.items(), key=lambda kv: order.index(kv[0])
                                            if kv[0] in order else len(order)))
    save_meta(meta_path, labs_meta)


# ---------------------------------------------------------------------------------------------------- documents

def write_if_changed(path, text):
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
    if old != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return True
    return False


def rewrite(path, regions, rel, labs_with_csv):
    """The text of `path` with every known region replaced; (new text, problems, regions found)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, problems, found, i = [], [], set(), 0
    while i < len(lines):
        m = START.match(lines[i])
        if not m:
            if END.match(lines[i]):
                problems.append(f"{rel}:{i + 1}: end marker without a start: {lines[i].strip()}")
            out.append(lines[i])
            i += 1
            continue
        name = m.group(1)
        j = i + 1
        while j < len(lines) and not END.match(lines[j]) and not START.match(lines[j]):
            j += 1
        end = END.match(lines[j]) if j < len(lines) else None
        if not end or end.group(1) != name:
            problems.append(f"{rel}:{i + 1}: <!-- results:{name} --> has no <!-- /results:{name} --> before the "
                            "next marker or the end of the file")
            out.append(lines[i])
            i += 1
            continue
        found.add(name)
        out.append(lines[i])
        if name in regions:
            out += regions[name].split("\n") + [""]
        else:
            if name[3:5] in labs_with_csv:
                problems.append(f"{rel}:{i + 1}: <!-- results:{name} --> is not a region this tool generates")
            out += lines[i + 1:j]
        out.append(lines[j])
        i = j + 1
    return "\n".join(out), problems, found


def lab_readme(root, lab):
    hits = sorted(glob.glob(os.path.join(root, "labs", f"{lab}_*", "README.md")))
    return hits[0] if hits else None


def plot(root, results, meta, labs_with_csv):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plots left as they are: matplotlib is not importable by " + sys.executable +
              " (install it, e.g. apt-get install python3-matplotlib, and run tools/reference_results.py again)")
        return 0
    failed = 0
    script = os.path.join(root, "tools", "plot_bench.py")
    for lab, png, args in PLOTS:
        if lab not in labs_with_csv:
            continue
        gpu = meta.get(lab, {}).get("gpu", "")
        gpu = re.sub(r"^NVIDIA ", "", gpu) or "unknown GPU"
        cmd = [sys.executable, script, os.path.join(results, f"lab{lab}.csv")] + \
              [a.replace("{gpu}", gpu) for a in args] + ["--out", os.path.join(results, png)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            failed += 1
            print(f"plot {png} failed: {(r.stderr or r.stdout).strip()}", file=sys.stderr)
        else:
            print(f"plot {os.path.relpath(os.path.join(results, png), root)}")
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", default=None, help="the CSVs, meta.json and plots (default docs/results)")
    p.add_argument("--root", default=ROOT, help="repository root whose docs are rewritten (default: this checkout)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 and print a diff when a generated region differs from the CSVs")
    p.add_argument("--no-plots", action="store_true", help="leave docs/results/*.png as they are")
    p.add_argument("--record", action="append", default=[], metavar="NN=BENCH_LOG",
                   help="before generating, record lab NN's run in meta.json: GPU, SMs and compute capability from "
                        "the bench's output, the rest from --meta (repeatable)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="a field of the recorded runs: driver, toolkit, date, commit, mode (quick|full); gpu and "
                        "compute_capability are used when the bench log lacks them")
    a = p.parse_args()
    root = os.path.abspath(a.root)
    results = os.path.abspath(a.results_dir or os.path.join(root, "docs", "results"))
    meta_path = os.path.join(results, "meta.json")

    if a.record:
        if a.check:
            p.error("--record writes meta.json; it cannot go with --check")
        for kv in a.meta:
            if "=" not in kv:
                p.error(f"--meta {kv}: KEY=VALUE expected")
        for rec in a.record:
            if not re.fullmatch(r"0?[1-9]=.*", rec) or rec.split("=", 1)[0].zfill(2) not in LABS:
                p.error(f"--record {rec}: NN=BENCH_LOG expected, NN one of {' '.join(LABS)}")
        record(meta_path, a.record, dict(kv.split("=", 1) for kv in a.meta))

    meta = load_meta(meta_path)
    regions, labs_with_csv = {}, []
    for lab in LABS:
        path = os.path.join(results, f"lab{lab}.csv")
        if not os.path.exists(path):
            print(f"lab {lab}: no {os.path.relpath(path, root)}; its regions are left as they are", file=sys.stderr)
            continue
        bench = Bench(path)
        if not bench.rows:
            print(f"lab {lab}: {os.path.relpath(path, root)} has no rows; its regions are left as they are",
                  file=sys.stderr)
            continue
        labs_with_csv.append(lab)
        regions.update(GENERATORS[lab](bench, meta))
    regions["meta"] = meta_table(meta, labs_with_csv or LABS)

    docs = [(os.path.join(root, "docs", "reference-results.md"), set(regions))]
    for lab in LABS:
        readme = lab_readme(root, lab)
        if readme:
            docs.append((readme, {n for n in regions if n == f"lab{lab}" or n.startswith(f"lab{lab}:")}))
    problems, changed, new_texts = [], [], {}
    for path, expected in docs:
        rel = os.path.relpath(path, root)
        if not os.path.exists(path):
            problems.append(f"{rel}: missing")
            continue
        text, probs, found = rewrite(path, regions, rel, labs_with_csv)
        problems += probs
        for name in sorted(expected - found):
            problems.append(f"{rel}: no <!-- results:{name} --> ... <!-- /results:{name} --> region")
        new_texts[path] = text
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print("nothing written: add or fix the markers above", file=sys.stderr)
        return 2

    for path, text in new_texts.items():
        old = open(path, encoding="utf-8").read()
        if old == text:
            continue
        rel = os.path.relpath(path, root)
        changed.append(rel)
        if a.check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       "a/" + rel, "b/" + rel))
        else:
            write_if_changed(path, text)
    if a.check:
        if changed:
            print(f"\n{len(changed)} file(s) differ from what the CSVs generate: {', '.join(changed)}\n"
                  "run tools/reference_results.py to rewrite them", file=sys.stderr)
            return 1
        print("docs agree with the CSVs in " + os.path.relpath(results, root))
        return 0
    print(("rewrote " + ", ".join(changed)) if changed else "docs already agree with the CSVs (nothing rewritten)")
    failed = 0 if a.no_plots else plot(root, results, meta, labs_with_csv)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
