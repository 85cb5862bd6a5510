#!/usr/bin/env bash
# CTest (label grader): grader/integrations/slurm end to end without Slurm and without a GPU. Grades 5 students in
# 2 parts (grade-array.sbatch with SLURM_ARRAY_TASK_ID/COUNT set by hand), merges them (labgrade merge) and
# checks that the merged gradebook has every student exactly once per gate, the same gates as each part, and
# that a student in two parts is refused.
#
#   grader/tests/slurm_split_merge.sh LABGRADE      (LABGRADE: build/<preset>/labgrade, its lab gates built)
# Submissions: the skeleton files of the build's first lab (they compile; without a GPU the gates skip), one
# student without files, a name with a space, and a dot folder (not a student).
set -euo pipefail
labgrade=$(cd "$(dirname "${1:?usage: slurm_split_merge.sh LABGRADE}")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
slurm=$repo/grader/integrations/slurm
build=$(dirname "$labgrade")
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }

recipe=$(ls "$build"/grading/lab*.json 2>/dev/null | head -n 1 || true)
[ -n "$recipe" ] || { echo "FAIL: no grading recipe in $build/grading"; exit 1; }
lab_dir=$(sed -n 's/.*"lab_dir": *"\([^"]*\)".*/\1/p' "$recipe")
lab=$(basename "$lab_dir")
lab_no=${lab%%_*}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/slurm-split-merge.XXXXXX")
chmod 755 "$tmp"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT   # KEEP=1: keep the folder to look at
subs=$tmp/submissions run=$tmp/run
for s in alice bob "carol jr" "dave, jr"; do   # a comma once broke nvcc in the scratch path
  mkdir -p "$subs/$s/labs/$lab/student"
  cp "$lab_dir"/student/* "$subs/$s/labs/$lab/student/"
done
mkdir -p "$subs/erin" "$subs/.hidden-folder"   # erin: nothing submitted; dot folders are not students
echo "== $lab, students: $(ls "$subs" | tr '\n' ' ')"

source "$here/sandbox_fallback.sh"   # sandbox=(--sandbox none) where bubblewrap cannot run
for k in 0 1; do
  echo "== part $k of 2"
  rc=0
  SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=2 LABGRADE=$labgrade \
    bash "$slurm/grade-array.sbatch" "$subs" "$run" --lab "$lab_no" -j 2 "${sandbox[@]}" >"$tmp/part-$k.log" 2>&1 || rc=$?
  tail -n 4 "$tmp/part-$k.log"
  [ "$rc" -eq 0 ] || { cat "$tmp/part-$k.log"; echo "FAIL: part $k exited with $rc"; exit 1; }
done
echo "== merge"
"$labgrade" merge --submissions "$subs" "$run/merged" "$run"/out/part-*

fail=0
python3 - "$run" "$subs" <<'PY' || fail=1
import collections, csv, os, sys
run, subs = sys.argv[1], sys.argv[2]
ok = True
def check(cond, what):
    global ok
    ok = ok and bool(cond)
    print(("PASS  " if cond else "FAIL  ") + what)
students = sorted(e for e in os.listdir(subs) if not e.startswith("."))
parts = {}
for p in ("part-0", "part-1"):
    parts[p] = list(csv.DictReader(open(os.path.join(run, "out", p, "gradebook.csv"), newline="")))
rows = list(csv.DictReader(open(os.path.join(run, "merged", "gradebook.csv"), newline="")))
check(sum(len(r) for r in parts.values()) == len(rows), f"merged rows = sum of the parts' rows ({len(rows)})")
per = [sorted({r["student"] for r in parts[p]}) for p in parts]
check(per[0] and per[1] and not set(per[0]) & set(per[1]), f"the parts have disjoint students: {per}")
count = collections.Counter((r["student"], r["lab"], r["gate"]) for r in rows)
check(all(n == 1 for n in count.values()), "every (student, lab, gate) exactly once")
gates = collections.defaultdict(set)
for (s, l, g) in count:
    gates[s].add((l, g))
check(sorted(gates) == students, f"every student is in the merged gradebook: {sorted(gates)}")
check(len({frozenset(v) for v in gates.values()}) == 1 and all(gates.values()),
      f"every student has the same gates ({len(next(iter(gates.values())))})")
built = sorted({r["student"] for r in rows if r["status"] not in ("build_failed", "not_submitted")})
check(built == [s for s in students if s != "erin"], f"every submitted skeleton compiled: {built}")
erin = [r for r in rows if r["student"] == "erin"]
check(erin and all(r["status"] == "not_submitted" for r in erin), "the empty submission is not_submitted")
import xml.etree.ElementTree as ET
j = ET.parse(os.path.join(run, "merged", "junit.xml")).getroot()
suites = j.findall("testsuite")
check(len(suites) == len(students) and int(j.get("tests")) == len(rows), f"junit.xml: {len(suites)} suites, {j.get('tests')} tests")
md = open(os.path.join(run, "merged", "report.md")).read()
check(all(f"\n## {s} — " in md for s in students), "report.md: a section per student")
sys.exit(0 if ok else 1)
PY

# A student graded in two parts must be refused.
cp -R "$run/out/part-0" "$tmp/copy"
if "$labgrade" merge "$tmp/dup" "$run/out/part-0" "$tmp/copy" 2>"$tmp/dup.err"; then
  echo "FAIL  a student in two parts is refused"; fail=1
else
  grep -q "in two parts" "$tmp/dup.err" && echo "PASS  a student in two parts is refused" ||
    { echo "FAIL  a student in two parts is refused: $(cat "$tmp/dup.err")"; fail=1; }
fi
# A student without a result is reported (exit 1).
mkdir -p "$subs/frank"
set +e
"$labgrade" merge --submissions "$subs" "$tmp/incomplete" "$run"/out/part-* 2>"$tmp/missing.err"
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "no result for frank" "$tmp/missing.err" &&
  echo "PASS  a student without a result is reported" ||
  { echo "FAIL  a student without a result is reported (exit $rc): $(cat "$tmp/missing.err")"; fail=1; }

[ "$fail" -eq 0 ] && echo "SLURM SPLIT+MERGE: PASS" || echo "SLURM SPLIT+MERGE: FAIL"
exit "$fail"
