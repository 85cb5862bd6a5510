#!/usr/bin/env bash
# CTest (label grader): make-autograder.sh builds a zip from the committed tree with the layout Gradescope needs
# (setup.sh and run_autograder at the top, executable), the chosen labs and architectures in autograder.conf, and
# no solutions/; check-results.py accepts labgrade's results.json and rejects broken ones. The full rehearsal
# (build and grade inside the zip) is grader/integrations/gradescope/rehearse.sh. Skipped outside a git checkout.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gs=$(cd "$here/../integrations/gradescope" && pwd)
git -C "$here" rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gradescope-zip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "PASS  $1"; else echo "FAIL  $1"; fail=1; fi; }

"$gs/make-autograder.sh" --labs 1 --arch "86;90" "$tmp/autograder.zip"
python3 - "$tmp/autograder.zip" >"$tmp/listing" <<'PY'
import sys, zipfile
for i in zipfile.ZipFile(sys.argv[1]).infolist():
    print(f"{(i.external_attr >> 16) & 0o777:o} {i.filename}")
PY
check "setup.sh at the top, executable" "grep -qx '755 setup.sh' '$tmp/listing'"
check "run_autograder at the top, executable" "grep -qx '755 run_autograder' '$tmp/listing'"
check "the workbook is in workbook/" "grep -q ' workbook/CMakeLists.txt$' '$tmp/listing'"
check "no solutions/ in the zip" "! grep -q ' workbook/solutions/' '$tmp/listing'"
check "no planted fixtures (they quote the solutions) in the zip" "! grep -q ' workbook/grader/fixtures/planted/' '$tmp/listing'"
python3 -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("autograder.conf").decode())' \
  "$tmp/autograder.zip" >"$tmp/conf"
check "autograder.conf: LABS=\"01\"" "grep -qx 'LABS=\"01\"' '$tmp/conf'"
check "autograder.conf: CUDA_ARCHITECTURES=\"86;90\"" "grep -qx 'CUDA_ARCHITECTURES=\"86;90\"' '$tmp/conf'"
check "a bad --arch is refused" "! '$gs/make-autograder.sh' --arch sm_90 '$tmp/x.zip' 2>/dev/null"

# check-results.py on a good and on broken results.
cat >"$tmp/good.json" <<'EOF'
{"score": 10, "max_score": 20, "output": "x", "tests": [
 {"name": "lab01 a", "score": 10, "max_score": 10, "status": "passed", "output": "status: passed", "visibility": "visible", "tags": ["lab01", "cpu"]},
 {"name": "lab01 b", "score": 0, "max_score": 10, "status": "failed", "output": "status: skipped", "visibility": "after_due_date", "tags": ["lab01", "correctness"]}],
 "leaderboard": [{"name": "lab01 rate", "value": 3.5, "order": "desc"}]}
EOF
check "check-results.py: a valid file and the no-GPU solution expectation" \
  "python3 '$gs/check-results.py' '$tmp/good.json' --labs 01 --gpu no --expect solutions >'$tmp/out' 2>&1"
sed 's/"score": 10, "max_score": 20/"score": 12, "max_score": 20/' "$tmp/good.json" >"$tmp/sum.json"
check "check-results.py: a score that is not the sum of the tests is refused" \
  "! python3 '$gs/check-results.py' '$tmp/sum.json' >'$tmp/out' 2>&1"
sed 's/"status": "failed"/"status": "skipped"/' "$tmp/good.json" >"$tmp/status.json"
check "check-results.py: a status other than passed/failed is refused" \
  "! python3 '$gs/check-results.py' '$tmp/status.json' >'$tmp/out' 2>&1"
sed 's/"after_due_date"/"later"/' "$tmp/good.json" >"$tmp/vis.json"
check "check-results.py: an unknown visibility is refused" "! python3 '$gs/check-results.py' '$tmp/vis.json' >'$tmp/out' 2>&1"
check "check-results.py: the GPU expectation fails on a skipped gate" \
  "! python3 '$gs/check-results.py' '$tmp/good.json' --labs 01 --gpu yes --expect solutions >'$tmp/out' 2>&1"
exit "$fail"
