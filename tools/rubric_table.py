#!/usr/bin/env python3
"""Fill each lab README's gate table from the lab's rubric.toml, so that a threshold a student reads is the one
the grader applies.

The table goes between two marker lines of labs/NN_topic/README.md:

    <!-- rubric-table:begin -->
    (generated: gate id, what it checks, kind, points, when it passes, what the reference solution measured)
    <!-- rubric-table:end -->

Hidden gates (hidden = true) are left out: they are not in the student release. A speed gate's "passes when"
names its metric, its threshold, the baseline it is measured against when the rubric says so (`baseline = "..."`,
optional; the title says it otherwise), the partial-credit floor and the ceiling (`max_ratio`) above which the
measurement is rejected.

    tools/rubric_table.py            rewrite the tables that are out of date
    tools/rubric_table.py --check    change nothing; exit 1 naming each README whose table is out of date

A README without the markers is reported with a warning and left alone (exit 0), so the markers can be added one
lab at a time; a README with a begin marker and no end marker (or two tables) is an error.
"""
import argparse
import glob
import os
import sys
import tomllib

BEGIN = "<!-- rubric-table:begin -->"
END = "<!-- rubric-table:end -->"
NOTE = "<!-- generated from rubric.toml by tools/rubric_table.py: edit the rubric, then run the tool -->"


def num(x):
    """A threshold as the rubric writes it: 0.38, 2, 1e-05."""
    return f"{x:g}"


def cell(text):
    """Markdown table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def passes_when(g):
    kind = g.get("kind", "correctness")
    if kind == "cpu":
        return "the CPU check holds"
    if kind == "correctness":
        text = "right on every shape"
        if g.get("needs_shared_memory"):
            text += "; a kernel of yours that it ran loads from shared memory"
        if g.get("needs_instructions"):
            text += "; a kernel of yours that it ran holds " + " or ".join(g["needs_instructions"])
            if g.get("instruction_archs"):
                text += " (checked on " + ", ".join(g["instruction_archs"]) + " GPUs)"
        if g.get("forbid_instructions"):
            text += "; no kernel of yours that it ran holds any of " + ", ".join(g["forbid_instructions"])
        return text
    metric = g.get("metric", "ratio")
    text = f"{metric} ≥ {num(g['threshold'])}"
    if g.get("baseline"):
        text += f" against {g['baseline']}"
    if "floor" in g:
        text += f" (partial points from {num(g['floor'])})"
    if "max_ratio" in g:
        text += f"; above {num(g['max_ratio'])} rejected as impossible"
    return text


def table(rubric):
    """The Markdown between the markers (without them)."""
    gates = [g for g in rubric.get("gate", []) if not g.get("hidden", False)]
    rows = [NOTE, "",
            "| gate | what it checks | kind | points | passes when | reference solution (its GPU: rubric.toml) |",
            "| --- | --- | --- | ---: | --- | ---: |"]
    for g in gates:
        ref = num(g["reference"]) if "reference" in g else ""
        points = g.get("points", 0)
        rows.append(f"| `{cell(g['id'])}` | {cell(g.get('title', g['id']))} | {g.get('kind', 'correctness')} | "
                    f"{num(points)} | {cell(passes_when(g))} | {ref} |")
    total = sum(g.get("points", 0) for g in gates)
    rows += ["", f"Total: {num(total)} points. Correctness and speed gates need a GPU: without one they are "
             "skipped, right or wrong. A speed gate's ratio is the baseline's time divided by yours (above 1: yours "
             "is faster), both measured in the same run."]
    return "\n".join(rows)


def render(readme_text, rubric):
    """(new text, problem): new text is None when the README has no markers; problem is an error message."""
    lines = readme_text.split("\n")
    begins = [i for i, l in enumerate(lines) if l.strip() == BEGIN]
    ends = [i for i, l in enumerate(lines) if l.strip() == END]
    if not begins and not ends:
        return None, None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        return None, f"needs exactly one {BEGIN} line followed by one {END} line"
    b, e = begins[0], ends[0]
    new = lines[:b + 1] + table(rubric).split("\n") + lines[e:]
    return "\n".join(new), None


def lab_dirs(root, wanted):
    dirs = sorted(d for d in glob.glob(os.path.join(root, "labs", "[0-9][0-9]_*")) if os.path.isdir(d))
    if wanted:
        dirs = [d for d in dirs if os.path.basename(d)[:2] in wanted or os.path.basename(d) in wanted]
    return dirs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table is out of date")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository (default: the one holding this script)")
    ap.add_argument("labs", nargs="*", help="labs to handle: 01 or 01_matmul (default: all)")
    a = ap.parse_args()
    stale, errors, written = [], [], []
    for d in lab_dirs(a.root, a.labs):
        readme, rubric_path = os.path.join(d, "README.md"), os.path.join(d, "rubric.toml")
        rel = os.path.relpath(readme, a.root)
        if not os.path.exists(readme) or not os.path.exists(rubric_path):
            continue
        text = open(readme, encoding="utf-8").read()
        try:
            with open(rubric_path, "rb") as f:
                rubric = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            errors.append(f"{os.path.relpath(rubric_path, a.root)}: {e}")
            continue
        new, problem = render(text, rubric)
        if problem:
            errors.append(f"{rel}: {problem}")
        elif new is None:
            print(f"rubric_table: warning: {rel} has no {BEGIN} ... {END} block (no gate table)", file=sys.stderr)
        elif new != text:
            if a.check:
                stale.append(rel)
            else:
                with open(readme, "w", encoding="utf-8") as f:
                    f.write(new)
                written.append(rel)
    for e in errors:
        print(f"rubric_table: error: {e}", file=sys.stderr)
    for s in stale:
        print(f"rubric_table: {s}: the gate table does not match rubric.toml: run tools/rubric_table.py",
              file=sys.stderr)
    for w in written:
        print(f"rubric_table: updated {w}")
    return 1 if stale or errors else 0


if __name__ == "__main__":
    sys.exit(main())
