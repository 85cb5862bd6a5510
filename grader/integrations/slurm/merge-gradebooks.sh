#!/usr/bin/env bash
# Merges the outputs of several `labgrade batch` runs over disjoint sets of students (the parts of
# grade-array.sbatch, or batches on different machines) into one set of class outputs:
#
#   merge-gradebooks.sh [--submissions SUBMISSIONS] MERGED_DIR PART_OUT_DIR...
#
#   MERGED_DIR/gradebook.csv  every part's gradebook.csv rows under one header, sorted by student (cells unchanged)
#   MERGED_DIR/totals.csv     student,points,max_points: one row per student, for a gradebook upload
#   MERGED_DIR/junit.xml      every part's <testsuite> elements in one <testsuites>, counts summed
#   MERGED_DIR/report.md      the summary table and the pass rate of each gate over the whole class (recomputed from
#                             the merged gradebook), then every student's section from the parts' report.md
# Checks: a student graded in two parts is an error (nothing is written); with --submissions, students whose
# folder has no result in any part (not graded yet, or a grader error: OUT/<student>/grader-error.txt) are listed.
# Exit status: 0 merged and complete; 1 merged, but students are missing; 2 nothing merged (bad input, duplicates).
# Needs python3.
set -euo pipefail
command -v python3 >/dev/null || { echo "merge-gradebooks: needs python3" >&2; exit 2; }
exec python3 - "$@" <<'PY'
import argparse, collections, csv, io, os, re, sys
import xml.etree.ElementTree as ET

ap = argparse.ArgumentParser(prog="merge-gradebooks.sh",
                             description="Merge the gradebook.csv, junit.xml and report.md of several labgrade batch "
                                         "output folders (disjoint students) into MERGED_DIR.")
ap.add_argument("--submissions", help="the submissions folder: report students without a result in any part")
ap.add_argument("merged", metavar="MERGED_DIR")
ap.add_argument("parts", metavar="PART_OUT_DIR", nargs="+")
a = ap.parse_args()

def die(msg):
    print(f"merge-gradebooks: {msg}", file=sys.stderr)
    sys.exit(2)

merged = os.path.abspath(a.merged)
parts = [os.path.abspath(p) for p in a.parts]
if merged in parts:
    die("MERGED_DIR must not be one of the parts")
header, rows, owner = None, [], {}          # owner: student -> part
for p in parts:
    f = os.path.join(p, "gradebook.csv")
    if not os.path.isfile(f):
        die(f"{f} does not exist (has that part's batch finished? labgrade writes it at the end of every run)")
    with open(f, newline="", encoding="utf-8") as fh:
        r = csv.reader(fh)
        h = next(r, None)
        if h is None or h[:3] != ["student", "lab", "gate"]:
            die(f"{f} is not a labgrade gradebook (header {h})")
        if header is None:
            header = h
        elif h != header:
            die(f"{f} has another header than the first part ({h} vs {header}): different labgrade versions?")
        seen_here = set()
        for row in r:
            if not row:
                continue
            s = row[0]
            if s in owner and owner[s] != p:
                die(f"student {s!r} is in two parts: {owner[s]} and {p} (was the number of parts changed between "
                    "runs? remove the stale result)")
            owner[s] = p
            key = (s, row[1], row[2])
            if key in seen_here:
                die(f"{f}: {key} appears twice")
            seen_here.add(key)
            rows.append(row)
rows.sort(key=lambda r: r[0])    # stable: each student's gates keep their order
os.makedirs(merged, exist_ok=True)

def write(name, text):
    tmp = os.path.join(merged, "." + name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, os.path.join(merged, name))

buf = io.StringIO()
w = csv.writer(buf, lineterminator="\n")
w.writerow(header)
w.writerows(rows)
write("gradebook.csv", buf.getvalue())

col = {name: i for i, name in enumerate(header)}
def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0
def pts(x):
    return f"{x:g}"
students = sorted(owner)
labs = sorted({r[col["lab"]] for r in rows})
score = collections.defaultdict(lambda: [0.0, 0.0])          # (student, lab) -> points, max
for r in rows:
    sc = score[(r[0], r[col["lab"]])]
    sc[0] += num(r[col["points"]])
    sc[1] += num(r[col["max_points"]])
buf = io.StringIO()
w = csv.writer(buf, lineterminator="\n")
w.writerow(["student", "points", "max_points"])
for s in students:
    w.writerow([s, pts(sum(score[(s, l)][0] for l in labs)), pts(sum(score[(s, l)][1] for l in labs))])
write("totals.csv", buf.getvalue())

# JUnit: the parts' suites side by side.
root = ET.Element("testsuites", {"name": "labgrade"})
totals = collections.Counter()
for p in parts:
    f = os.path.join(p, "junit.xml")
    if not os.path.isfile(f):
        die(f"{f} does not exist")
    t = ET.parse(f).getroot()
    for suite in t.iter("testsuite"):
        root.append(suite)
        for k in ("tests", "failures", "errors", "skipped"):
            totals[k] += int(suite.get(k, "0"))
for k in ("tests", "failures", "errors", "skipped"):
    root.set(k, str(totals[k]))
ET.indent(root) if hasattr(ET, "indent") else None
write("junit.xml", '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n")

# Markdown: the class tables from the merged gradebook, then the students' sections of each part's report.
def cell(s):
    return s.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")
md = [f"# Grading report: {len(students)} students from {len(parts)} parts", "",
      "Merged by merge-gradebooks.sh from: " + ", ".join(f"`{p}`" for p in parts) + ".", "",
      "## Summary", "", "| student |" + "".join(f" lab {l} |" for l in labs) + " total |",
      "|---|" + "---:|" * (len(labs) + 1)]
for s in students:
    line = f"| {cell(s)} |"
    for l in labs:
        sc = score.get((s, l))
        line += f" {pts(sc[0])}/{pts(sc[1])} |" if sc else " - |"
    line += f" {pts(sum(score[(s, l)][0] for l in labs))}/{pts(sum(score[(s, l)][1] for l in labs))} |"
    md.append(line)
passed, order = collections.defaultdict(lambda: [0, 0]), []
for r in rows:
    k = f"lab{r[col['lab']]} {r[col['gate']]}"
    if k not in passed:
        order.append(k)
    passed[k][0] += r[col["status"]] == "passed"
    passed[k][1] += 1
md += ["", "### Pass rate per gate", "", "| gate | passed |", "|---|---:|"]
md += [f"| {cell(k)} | {passed[k][0]}/{passed[k][1]} |" for k in order]
md.append("")
sections = []
for p in parts:
    f = os.path.join(p, "report.md")
    if not os.path.isfile(f):
        continue
    lines = open(f, encoding="utf-8").read().split("\n")
    try:
        start = lines.index("### Pass rate per gate")
    except ValueError:
        continue
    cur = None
    for line in lines[start + 1:]:
        if line.startswith("## "):
            cur = [line]
            sections.append(cur)
        elif cur is not None:
            cur.append(line)
sections.sort(key=lambda sec: sec[0])
for sec in sections:
    md += sec
write("report.md", "\n".join(md).rstrip("\n") + "\n")

print(f"merge-gradebooks: {len(students)} students, {len(rows)} gradebook rows from {len(parts)} parts -> "
      f"{merged}/gradebook.csv, totals.csv, junit.xml, report.md")

# Completeness: every submission folder has a result somewhere.
missing = []
if a.submissions:
    for e in sorted(os.listdir(a.submissions)):
        if e.startswith(".") or not os.path.isdir(os.path.join(a.submissions, e)):
            continue
        if not any(os.path.isfile(os.path.join(p, e, "result.json")) for p in parts):
            errors = [os.path.join(p, e, "grader-error.txt") for p in parts
                      if os.path.isfile(os.path.join(p, e, "grader-error.txt"))]
            missing.append(e + (f" (grader error: {errors[0]})" if errors else " (not graded yet)"))
if missing:
    print(f"merge-gradebooks: {len(missing)} student(s) without a result (rerun their part to retry):", file=sys.stderr)
    for m in missing:
        print("  " + m, file=sys.stderr)
    sys.exit(1)
PY
