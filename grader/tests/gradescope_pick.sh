#!/usr/bin/env bash
# CTest (label grader): which files run_autograder takes out of a Gradescope submission, on a stand-in workbook whose
# `labgrade` only prints what it was handed. The shallowest file at a skeleton's path, or the one file of its name;
# never a symbolic link, a path with a control character, or one that resolves outside the submission. A folder
# named "x<newline>" beside a link "x" to a hidden gate once made the link look like a candidate of its own, and
# root copied the gate into the student's file.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=$here/../integrations/gradescope/run_autograder
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gradescope-pick.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "PASS  $1"; else echo "FAIL  $1"; fail=1; fi; }

root=$tmp/autograder
wb=$root/source/workbook
mkdir -p "$wb/labs/01_matmul/student" "$wb/labs/01_matmul/tests/hidden" "$wb/labs/02_transpose/student" "$wb/build/ci"
echo "skeleton" >"$wb/labs/01_matmul/student/matmul.cu"
echo "skeleton" >"$wb/labs/02_transpose/student/transpose.cu"
echo "SECRET hidden gate" >"$wb/labs/01_matmul/tests/hidden/gate.cpp"
cat >"$wb/build/ci/labgrade" <<'SH'
#!/bin/bash
for a; do case "$a" in */submissions) S=$a;; esac; done
find "$S" -type f | sort | while read -r f; do echo "HANDED ${f#"$S"/submission/}: $(cat "$f")"; done
SH
chmod +x "$wb/build/ci/labgrade"

run() {  # the submission in $root/submission; prints run_autograder's output
  AUTOGRADER_ROOT=$root bash "$script" 2>&1 || true
}

# 1. The attack: "x<newline>/a/b/c/d/e/labs/01_matmul/student/matmul.cu" beside a link "x" to the hidden gate (the
#    folders below the newline make that half of the path deeper than "$SUB/x", which then read as the shallowest).
sub=$root/submission
deep="x"$'\n'"/a/b/c/d/e/labs/01_matmul/student"
mkdir -p "$sub/$deep"
echo "student's own" >"$sub/$deep/matmul.cu"
ln -s "$wb/labs/01_matmul/tests/hidden/gate.cpp" "$sub/x"
out=$(run)
check "a link beside a folder whose name ends in a newline is not taken" "! grep -q SECRET <<<\"\$out\""
check "a path with a newline is not taken either" "grep -q 'labs/01_matmul/student/matmul.cu: not in the submission' <<<\"\$out\""

# 2. A repository layout, a link at the same path higher up, and a file found by its name alone.
rm -rf "$sub" && mkdir -p "$sub/repo/labs/01_matmul/student" "$sub/labs/01_matmul/student" "$sub/deep/er"
echo "student's matmul" >"$sub/repo/labs/01_matmul/student/matmul.cu"
ln -s "$wb/labs/01_matmul/tests/hidden/gate.cpp" "$sub/labs/01_matmul/student/matmul.cu"
echo "student's transpose" >"$sub/deep/er/transpose.cu"
out=$(run)
check "the shallowest regular file at the path, not a shallower link" \
  "grep -q \"HANDED labs/01_matmul/student/matmul.cu: student's matmul\" <<<\"\$out\""
check "a file taken by its name" "grep -q \"HANDED labs/02_transpose/student/transpose.cu: student's transpose\" <<<\"\$out\""
check "nothing of the hidden gate" "! grep -q SECRET <<<\"\$out\""

# 3. A folder of the submission that is a link to a folder outside it.
rm -rf "$sub" && mkdir -p "$sub"
ln -s "$wb/labs" "$sub/labs"
out=$(run)
check "a linked folder is not searched" "grep -q 'labs/01_matmul/student/matmul.cu: not in the submission' <<<\"\$out\""

[ "$fail" = 0 ] && echo "gradescope_pick: all checks passed"
exit "$fail"
