"""The measured-results tables of each lab, as Markdown, from the lab's bench CSV: the formatting of the figures,
the CSV reader (Bench: medians over runs) and one generator per lab (GENERATORS). tools/reference_results.py puts
the tables into the generated regions of the docs; this module only decides what each table shows.
Standard library only.
"""
import csv
import re
import statistics
import sys
from decimal import Decimal

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
