#!/usr/bin/env bash
# On a GPU machine: grades every fault fixture (grader/fixtures, including planted/) and two copies of every lab's
# reference solution with `labgrade batch`, then checks each student's gate statuses against the fixtures'
# expectations (GPU column of grader/fixtures/EXPECTED.md) and prints a PASS/FAIL table. Exit status 0 = all PASS.
#
# usage: grader/tests/device_fixtures.sh [BUILD_DIR] [extra `labgrade batch` options...]
#   BUILD_DIR  the build folder (default: build/gpu; configured and built if needed, e.g. cmake --preset gpu)
#   WORK=DIR   keep the submissions and results there (default: a new folder under /tmp)
#   ONLY="a b"   grade only these fixtures (names as in `labgrade fixtures materialise`, e.g. planted-silent_race)
#   SKIP="a b"   grade every fixture but these
#   SOLUTION_COPIES=N   copies of the reference solutions in the batch (default 2)
# Examples:
#   grader/tests/device_fixtures.sh
#   grader/tests/device_fixtures.sh build/gpu --sandbox none      # compare without bubblewrap
#   grader/tests/device_fixtures.sh build/gpu --sanitize          # also run compute-sanitizer
#   ONLY=planted-lab08_silent_race grader/tests/device_fixtures.sh  # one fixture and the solution copies
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/gpu}
[ $# -gt 0 ] && shift
build=$(cd "$root" && mkdir -p "$build" && cd "$build" && pwd)

if [ ! -f "$build/CMakeCache.txt" ]; then
  (cd "$root" && cmake --preset gpu -B "$build")
fi
cmake --build "$build" --target labgrade grader_fakelab_gates_student grader_fakelab_gates_solution -j "$(nproc)"
labgrade=$build/labgrade

work=${WORK:-$(mktemp -d /tmp/labgrade-fixtures.XXXXXX)}
mkdir -p "$work"
echo "== labgrade doctor"
"$labgrade" --repo "$root" doctor --build-dir "$build" || true

echo "== materialising the fixtures in $work/submissions"
rm -rf "$work/submissions" "$work/out"
only=()
for f in ${ONLY:-}; do only+=(--only "$f"); done
"$labgrade" --repo "$root" fixtures materialise "$work/submissions" --solution-copies "${SOLUTION_COPIES:-2}" "${only[@]}"
for f in ${SKIP:-}; do
  [ -d "$work/submissions/$f" ] || { echo "SKIP: no fixture named $f" >&2; exit 2; }
  rm -rf "${work:?}/submissions/$f"
done

# Labs 08 and 09 have gates that need two GPUs: on a machine with two or more, one worker gets them all (--gpus
# 0+1+...), as an instructor grading those labs would run it (a worker per GPU would skip those gates for everyone).
extra=()
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -ge 2 ] && ! printf '%s\n' "$@" | grep -q -- '^--gpus'; then
  extra=(--gpus "$(seq -s + 0 $((gpus - 1)))")
fi
echo "== labgrade batch ${extra[*]} (logs: $work/batch.log)"
start=$(date +%s)
set +e
"$labgrade" --repo "$root" batch "$work/submissions" --out "$work/out" --build-dir "$build" \
  --grading-dir "$build/grading" --grading-dir "$build/grader/fakelab/grading" "${extra[@]}" "$@" 2>&1 | tee "$work/batch.log"
batch_rc=${PIPESTATUS[0]}
set -e
echo "== batch exit status $batch_rc after $(( $(date +%s) - start )) s; reports in $work/out (report.md, gradebook.csv, junit.xml)"

echo "== checking the results against the fixtures' expectations (GPU)"
set +e
"$labgrade" --repo "$root" fixtures check "$work/out" --gpu yes | tee "$work/check.txt"
check_rc=${PIPESTATUS[0]}
set -e
[ "$batch_rc" -eq 0 ] || echo "note: the batch itself reported grader errors (exit $batch_rc): see $work/batch.log"
if [ "$check_rc" -eq 0 ] && [ "$batch_rc" -eq 0 ]; then echo "DEVICE FIXTURES: PASS"; else echo "DEVICE FIXTURES: FAIL"; fi
[ "$check_rc" -eq 0 ] && [ "$batch_rc" -eq 0 ]
