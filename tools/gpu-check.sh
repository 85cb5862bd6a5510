#!/usr/bin/env bash
# gpu-check.sh: on a machine with an NVIDIA GPU, configure (gpu preset), build everything, run the whole test
# suite (CPU tests and every gate against the reference solutions), grade the solutions and the student tree,
# run the benches, and print a short summary. Logs, CSVs and JUnit files go to $OUT (default build/gpu-check).
#
#   tools/gpu-check.sh [--no-bench] [--quick-bench] [--labs "01 02"] [--sanitize] [--extra CMD]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/build/gpu-check}
mkdir -p "$out/logs" "$out/bench"
bench=full labs="" sanitize=0 extra=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) bench=none ;;
    --quick-bench) bench=quick ;;
    --labs) labs=$2; shift ;;
    --sanitize) sanitize=1 ;;
    --extra) extra=$2; shift ;;
    *) echo "usage: $0 [--no-bench] [--quick-bench] [--labs \"01 02\"] [--sanitize] [--extra CMD]"; exit 2 ;;
  esac
  shift
done
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
stamp() { echo "$(( $(date +%s) - t0 ))s"; }

say "== gpu-check $(date -u +%Y-%m-%dT%H:%MZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
say "   nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), cmake $(cmake --version | head -1 | awk '{print $3}')"

if ! cmake --preset gpu ${LABS_CMAKE_ARGS:-} > "$out/logs/configure.log" 2>&1; then
  say "CONFIGURE FAILED"; tail -30 "$out/logs/configure.log"; exit 1
fi
if ! cmake --build --preset gpu > "$out/logs/build.log" 2>&1; then
  say "BUILD FAILED [$(stamp)]"; grep -E 'error|Error' "$out/logs/build.log" | head -40; exit 1
fi
say "build ok [$(stamp)]"

label_filter=()
if [ -n "$labs" ]; then
  re=$(echo "$labs" | sed "s/ /|lab/g"); label_filter=(-L "cpu|grader|lab$re")
fi
ctest --preset gpu -LE student "${label_filter[@]}" --output-junit "$out/ctest-junit.xml" > "$out/logs/ctest.log" 2>&1
rc=$?
say "ctest (solutions + CPU tests): $(grep -E 'tests passed|tests failed' "$out/logs/ctest.log" | tail -1) [$(stamp)]"
grep -E '\*\*\*(Failed|Skipped|Timeout|Exception)|\(Failed\)|\(Skipped\)|Not Run' "$out/logs/ctest.log" | sed 's/^/   /' | tee -a "$summary" | head -40
[ $rc -eq 0 ] || say "   (ctest exit $rc)"

if [ -x build/gpu/labgrade ]; then
  build/gpu/labgrade --solutions --build-dir build/gpu --json "$out/grade-solutions.json" --markdown "$out/logs/grade-solutions.md" > "$out/logs/grade-solutions.txt" 2>&1
  say "labgrade --solutions: exit $? [$(stamp)]"; cat "$out/logs/grade-solutions.txt" | tail -60 | tee -a "$summary" >/dev/null
  build/gpu/labgrade --build-dir build/gpu --json "$out/grade-student.json" > "$out/logs/grade-student.txt" 2>&1
  say "labgrade (student tree): exit $? [$(stamp)]"
else
  # No grader yet: run the student gate binaries directly and count the statuses from the result channel.
  for g in build/gpu/labs/*/lab*_gates_student; do
    n=$(basename "$g"); rm -f "$out/logs/$n.jsonl"
    "$g" --labkit-results "$out/logs/$n.jsonl" > "$out/logs/$n.txt" 2>&1
    say "$n: $(grep -o '"status":"[a-z_]*"' "$out/logs/$n.jsonl" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
  done
fi

if [ $sanitize -eq 1 ]; then
  for g in build/gpu/labs/*/lab*_gates_solution; do
    n=$(basename "$g")
    compute-sanitizer --tool memcheck --error-exitcode 9 "$g" "[correctness]" > "$out/logs/$n.memcheck.txt" 2>&1
    say "memcheck $n: exit $? $(grep -o 'ERROR SUMMARY: [0-9]* error' "$out/logs/$n.memcheck.txt" | tail -1)"
  done
fi

if [ "$bench" != none ]; then
  for b in build/gpu/labs/*/lab*_bench_solution; do
    n=$(basename "$b" _bench_solution)
    if [ -n "$labs" ] && ! echo " $labs " | grep -q " ${n#lab} "; then continue; fi
    flag=(); [ "$bench" = quick ] && flag=(--quick)
    timeout 300 "$b" --csv "$out/bench/$n.csv" "${flag[@]}" > "$out/bench/$n.txt" 2>&1
    say "bench $n: exit $? [$(stamp)]"
  done
fi
if [ -n "$extra" ]; then
  bash -c "$extra" > "$out/logs/extra.txt" 2>&1; say "extra: exit $? [$(stamp)]"
fi
tar -C "$out" -czf "$out/../gpu-check.tgz" . 2>/dev/null && mv "$out/../gpu-check.tgz" "$out/all.tgz"
say "== done in $(stamp)"
