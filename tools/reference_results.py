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
repeats. A lab without a CSV keeps its regions as they are. Then the figures docs/results/*.png are redrawn with
tools/plot_bench.py when matplotlib can be imported (skip with --no-plots).

    tools/reference_results.py                 # rewrite the regions and redraw the plots
    tools/reference_results.py --check         # exit 1 and print a diff when the docs are not what the CSVs give

tools/reference-results.sh runs the benches on a GPU machine and then this script; it records each lab's run
with --record NN=BENCH_LOG and --meta KEY=VALUE (driver, toolkit, date, commit, mode).
Standard library only (matplotlib only for the plots).
"""
import argparse
import csv
import difflib
import glob
import json
import os
import re
import statistics
import subprocess
import sys
from collections import OrderedDict
from decimal import Decimal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABS = ["01", "02", "03", "04", "05", "06", "07"]
START = re.compile(r"^<!-- results:(lab\d\d(?::[\w-]+)?|meta) -->\s*$")
END = re.compile(r"^<!-- /results:(lab\d\d(?::[\w-]+)?|meta) -->\s*$")
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


# ---------------------------------------------------------------------------------------------------- formatting

def grouped(v):
    """A whole number with a space between thousands: 42035.2 -> '42 035'."""
    return f"{v:,.0f}".replace(",", " ")


def sig3(v):
    """Three significant digits below 1000, a grouped whole number from 1000 on."""
    s = f"{v:.3g}"
    if abs(float(s)) >= 1000:
        return grouped(v)
    if "e" in s:
        s = format(Decimal(s), "f")
    return s


def fixed(digits):
    return lambda v: f"{v:.{digits}f}"


def trimmed3(v):
    """Three decimals without trailing zeros: 1.0 -> '1', 0.0332 -> '0.033', 0.2334 -> '0.233'."""
    s = f"{v:.3f}".rstrip("0").rstrip(".")
    return s or "0"


def pow2_text(n):
    """2**24 -> '2²⁴'; other numbers grouped."""
    if n > 0 and n & (n - 1) == 0:
        return "2" + str(n.bit_length() - 1).translate(SUP)
    return grouped(n)


def mega_text(n):
    """8388608 -> '8 M' (binary millions, as the docs write sizes of 2^k floats)."""
    return f"{n >> 20} M" if n >= 1 << 20 and n % (1 << 20) == 0 else grouped(n)


def table(header, align, rows):
    line = lambda cells: "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"
    return "\n".join([line(header), line(align)] + [line(r) for r in rows])


DASH = "—"


# ---------------------------------------------------------------------------------------------------- data

class Bench:
    """One lab's CSV: rows as dicts, medians over runs of any numeric column."""

    def __init__(self, path):
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            self.rows = []
            for r in reader:
                if None in r or None in r.values():  # a short or long line (e.g. a bench killed mid-write)
                    print(f"{path}:{reader.line_num}: {len(reader.fieldnames)} fields expected; line ignored",
                          file=sys.stderr)
                    continue
                self.rows.append(r)
        self.path = path
        runs = [int(r["run"]) for r in self.rows if r.get("run", "").strip().isdigit()]
        self.runs = max(runs) + 1 if runs else 0

    def select(self, **where):
        return [r for r in self.rows if all(r.get(k) == v for k, v in where.items())]

    def variants(self, group=None, **where):
        """The variants in the bench's order. With group (e.g. "n"), a variant first seen at a later size goes
        right after the variant that precedes it there, not at the end."""
        order, prev = [], {}
        for r in self.select(**where):
            v, g = r["variant"], r.get(group) if group else None
            if v not in order:
                after = prev.get(g)
                order.insert(order.index(after) + 1 if after in order else len(order), v)
            prev[g] = v
        return order

    def keys(self, column, **where):
        return sorted({int(r[column]) for r in self.select(**where)})

    def median(self, value, **where):
        vals = [float(r[value]) for r in self.select(**where) if r.get(value, "").strip()]
        return statistics.median(vals) if vals else None

    def pivot(self, row_col, value, fmt, variants=None, **where):
        """One row per value of row_col (ascending), one column per variant, each cell the median over runs."""
        variants = variants or self.variants(group=row_col, **where)
        body = []
        for k in self.keys(row_col, **where):
            cells = []
            for v in variants:
                m = self.median(value, **where, **{row_col: str(k), "variant": v})
                cells.append(DASH if m is None else fmt(m))
            body.append([str(k)] + cells)
        return variants, body


def caption(lab, bench, meta, note):
    """The first line of a lab's region: where and how the CSV was measured, then what the figures mean."""
    m = meta.get(lab)
    if m:
        where = f"{m.get('gpu', 'unknown GPU')}, driver {m.get('driver', 'unknown')}, CUDA {m.get('toolkit', 'unknown')}, " \
                f"{m.get('date', 'unknown date')}"
    else:
        where = "GPU, driver, toolkit and date not recorded (no entry in docs/results/meta.json)"
    runs = WORDS.get(bench.runs, str(bench.runs))
    if m and m.get("mode") == "quick":
        how = "`--quick`: one run, median of repeats" if bench.runs == 1 else f"`--quick`: median of {runs} runs"
    elif m and m.get("mode") == "full":
        how = "full sweep: " + ("one run, median of repeats" if bench.runs == 1
                                else f"median of {runs} runs, each a median of repeats")
    else:
        how = "one run, median of repeats" if bench.runs == 1 else f"median of {runs} runs, each a median of repeats"
    text = f"{where}; `lab{lab}_bench_solution`, the lab's bench against the reference solution ({how})."
    return text + (" " + note if note else "")


# ---------------------------------------------------------------------------------------------------- the labs
# Each returns {region name: Markdown}; region "labNN" is the first one, "labNN:name" the further ones.

def lab01(b, meta):
    sq = {"case": "square"}
    step_no = lambda v: int(re.match(r"step(\d+)_", v).group(1))
    steps = sorted((v for v in b.variants(**sq) if re.match(r"step\d+_", v)), key=step_no)
    cols = [v for v in b.variants(**sq) if v == "cublas"] + steps
    header = ["M = N = K"] + ["cuBLAS" if v == "cublas" else f"step {step_no(v)}" for v in cols]
    last = steps[-1] if steps else None
    if last:
        header.append(f"step {step_no(last)} / cuBLAS")
    rows = []
    for n in b.keys("N", **sq):
        row = [str(n)]
        for v in cols:
            m = b.median("gflops", **sq, N=str(n), variant=v)
            row.append(DASH if m is None else grouped(m))
        if last:
            r = b.median("ratio_to_cublas", **sq, N=str(n), variant=last)
            row.append(DASH if r is None else f"{r:.2f}")
        rows.append(row)
    return {"lab01": caption("01", b, meta, "GFLOP/s = 2·M·N·K / t.") + "\n\n"
            + table(header, ["---:"] * len(header), rows)}


def lab02(b, meta):
    variants, rows = b.pivot("rows", "gbs", sig3, case="square")
    return {"lab02": caption("02", b, meta, "GB/s count bytes read plus bytes written (2·rows·cols·4 / t).") + "\n\n"
            + table(["rows"] + variants, ["---:"] * (len(variants) + 1), rows)}


def lab03(b, meta):
    out = {}
    off = b.select(case="offset")
    parts = [caption("03", b, meta, "")]
    if off:
        n = int(off[0]["cols"])
        base = b.median("gbs", case="offset", variant="memcpy_d2d")
        zero = b.median("gbs", case="offset", variant="copy_offset", param="0")
        others = [p for p in b.keys("param", case="offset", variant="copy_offset") if p > 0]
        meds = [b.median("gbs", case="offset", variant="copy_offset", param=str(p)) for p in others]
        span = f"offsets {others[0]}–{others[-1]}" if others else "other offsets"
        cell = lambda v: DASH if v is None else grouped(v)
        header = ["memcpy_d2d", "offset 0", f"{span}, min", f"{span}, median", f"{span}, max"]
        row = [cell(base), cell(zero)] + ([cell(min(meds)), cell(statistics.median(meds)), cell(max(meds))]
                                          if meds else [DASH] * 3)
        parts.append(f"**Offset copy** ({mega_text(n)} floats; GB/s counting read + write):\n\n"
                     + table(header, ["---:"] * 5, [row]))
    out["lab03"] = "\n\n".join(parts)
    if b.select(case="stride"):
        n = int(b.select(case="stride")[0]["cols"])
        variants, rows = b.pivot("param", "gbs", sig3, case="stride")
        out["lab03:stride"] = (f"**Strided copy** ({mega_text(n)} floats; GB/s of the useful bytes only):\n\n"
                               + table(["stride"] + variants, ["---:"] * (len(variants) + 1), rows))
    return out


LAB04_LABELS = {
    "thrust_sort": "`thrust::sort` (radix sort)",
    "thrust_sort_by_key": "`thrust::sort_by_key` (radix sort, key-value)",
    "step1_global_pow2": "step 1: one kernel per (k, j) step",
    "step2_global": "step 2: any n, both directions",
    "step3_shared": "step 3: shared-memory chunks + global passes",
    "step4_pairs": "step 4: key-value pairs",
    "step5_fused": "step 5: fused global passes + register/shared chunks",
    "std_sort_cpu": "`std::sort` (one CPU core)",
}


def lab04(b, meta):
    out = {}
    sizes = b.keys("n", case="pow2")
    if sizes:
        n = 1 << 24 if (1 << 24) in sizes else sizes[-1]
        rows = []
        for v in b.variants(case="pow2", n=str(n)):
            ms = b.median("median_ms", case="pow2", n=str(n), variant=v)
            rate = b.median("gkeys_per_s", case="pow2", n=str(n), variant=v)
            ratio = b.median("ratio_to_thrust", case="pow2", n=str(n), variant=v)
            r = DASH if ratio is None else trimmed3(ratio)
            if v == "step5_fused" and ratio is not None:
                r = f"**{r}**"
            rows.append([LAB04_LABELS.get(v, f"`{v}`"), f"{ms:.2f}", sig3(rate), r])
        note = (f"At n = {pow2_text(n)} float keys (every GPU time includes restoring the unsorted input, a "
                "device-to-device copy):")
        out["lab04"] = caption("04", b, meta, note) + "\n\n" + table(
            ["variant", "ms", "Gkeys/s", "vs thrust::sort"], ["---", "---:", "---:", "---:"], rows)
        variants, body = b.pivot("n", "gkeys_per_s", sig3, case="pow2")
        out["lab04:sweep"] = ("The whole sweep over powers of two (same run, Gkeys/s):\n\n"
                              + table(["n"] + variants, ["---:"] * (len(variants) + 1), body))
    return out


def lab05(b, meta):
    out = {}
    variants, rows = b.pivot("n", "gbs", sig3, case="saxpy")
    out["lab05"] = (caption("05", b, meta, "GB/s = 12·n / t (read x and y, write y).") + "\n\n"
                    + table(["n"] + variants, ["---:"] * (len(variants) + 1), rows))
    if b.select(case="sort"):
        variants, rows = b.pivot("n", "median_ms", sig3, case="sort")
        out["lab05:roundtrip"] = ("Round trip (step 7, ms):\n\n"
                                  + table(["n"] + variants, ["---:"] * (len(variants) + 1), rows))
    return out


def lab06(b, meta):
    variants, rows = b.pivot("N", "gflops", sig3, case="square")
    note = "Effective GFLOP/s = 2·M·N² / t for every variant (the symmetric steps do about half of that work)."
    return {"lab06": caption("06", b, meta, note) + "\n\n"
            + table(["N"] + variants, ["---:"] * (len(variants) + 1), rows)}


def lab07(b, meta):
    it = {"case": "iteration"}
    variants, ms_rows = b.pivot("n", "median_ms", sig3, **it)
    _, frac_rows = b.pivot("n", "bound_fraction", sig3, **it)
    # The bench divides GB/s by the memcpy bandwidth it measured; the CSV keeps both sides of that quotient.
    bws = [float(r["gbs"]) / float(r["bound_fraction"]) for r in b.rows
           if r.get("gbs", "").strip() and r.get("bound_fraction", "").strip() and float(r["bound_fraction"]) > 0]
    bw = f" ({grouped(statistics.median(bws))} GB/s)" if bws else ""
    head, align = ["n"] + variants, ["---:"] * (len(variants) + 1)
    return {"lab07": caption("07", b, meta, "2D Poisson matrices (5-point), time per iteration (ms).") + "\n\n"
            + table(head, align, ms_rows) + "\n\n"
            + f"Fraction of the bytes-moved floor at the measured memcpy bandwidth{bw}:\n\n"
            + table(head, align, frac_rows)}


GENERATORS = {"01": lab01, "02": lab02, "03": lab03, "04": lab04, "05": lab05, "06": lab06, "07": lab07}

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
