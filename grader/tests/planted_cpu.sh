#!/usr/bin/env bash
# CTest (label grader): the planted bugs of lab 09 (grader/fixtures/planted/lab09_*), whose gates are cpu gates under
# mpirun and need no GPU, graded by `labgrade batch` beside one copy of the reference solutions; `labgrade fixtures
# check` must find every gate as the fixture expects (status and diagnosis). The GPU labs' planted bugs are graded
# by grader/tests/device_fixtures.sh on a GPU machine; that every fixture still applies to today's solutions is
# test_fixtures.cpp's "every fixture in grader/fixtures loads and materialises".
#
#   grader/tests/planted_cpu.sh LABGRADE      (LABGRADE: build/<preset>/labgrade; lab 09 in the same build)
set -euo pipefail
labgrade=$(cd "$(dirname "${1:?usage: planted_cpu.sh LABGRADE}")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(dirname "$labgrade")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/planted-cpu.XXXXXX")
chmod 755 "$tmp"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT   # KEEP=1: keep the folder to look at

only=()
for d in "$repo"/grader/fixtures/planted/lab09_*/; do only+=(--only "planted-$(basename "$d")"); done
[ ${#only[@]} -gt 0 ] || { echo "FAIL: no lab 09 fixture in grader/fixtures/planted"; exit 1; }
[ -f "$build/grading/lab09.json" ] || { echo "SKIP: lab 09 is not in this build (no MPI?)"; exit 77; }
"$labgrade" --repo "$repo" fixtures materialise "$tmp/lab09" --solution-copies 1 "${only[@]}"

source "$here/sandbox_fallback.sh"   # sandbox=(--sandbox none) where bubblewrap cannot run
echo "== labgrade batch --lab 09: $(ls "$tmp/lab09" | tr '\n' ' ')"
rc=0
"$labgrade" --repo "$repo" batch "$tmp/lab09" --out "$tmp/out" --build-dir "$build" --lab 09 "${sandbox[@]}" \
  >"$tmp/batch.log" 2>&1 || rc=$?
tail -n 6 "$tmp/batch.log"
[ "$rc" -eq 0 ] || { cat "$tmp/batch.log"; echo "FAIL: labgrade batch exited with $rc"; exit 1; }
echo "== labgrade fixtures check"
"$labgrade" --repo "$repo" fixtures check "$tmp/out"
