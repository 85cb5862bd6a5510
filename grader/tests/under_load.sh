#!/usr/bin/env bash
# Runs the grader's batch tests under full CPU load: as many busy loops as this machine has CPUs, for the whole
# run. A healthy submission must never lose points because the grading machine is busy (time limits count the gate
# binary's own progress: grader/src/progress.h), so every run must pass.
#   grader/tests/under_load.sh GRADER_TESTS [RUNS] [CATCH2 TEST SPEC]
# e.g. grader/tests/under_load.sh build/ci/grader/grader_tests 10
# Prints one line per run and "N passed, M failed" last; exits 1 when any run failed.
set -u
tests=${1:?usage: under_load.sh GRADER_TESTS [RUNS] [TEST SPEC]}
runs=${2:-1}
spec=${3:-[batch]}
cpus=$(nproc)
logdir=$(mktemp -d "${TMPDIR:-/tmp}/under-load.XXXXXX")
hogs=()
cleanup() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
for _ in $(seq "$cpus"); do
  # Each loop ends by itself after two hours, whatever happens to this script.
  timeout 7200 bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "load: $cpus busy loops on $cpus CPUs; logs in $logdir"
passed=0 failed=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  if "$tests" "$spec" > "$logdir/run$i.log" 2>&1; then
    passed=$((passed + 1)); verdict=passed
  else
    failed=$((failed + 1)); verdict=FAILED
  fi
  echo "run $i/$runs: $verdict in $(( $(date +%s) - start )) s (load average $(cut -d' ' -f1 /proc/loadavg))"
  # Catch2 prints nothing of a passing test case, and all of a failing one (its name, the check, every INFO message)
  # from a line of dashes on: the log stays in $logdir, which is gone with a CI machine, so it goes to ctest too.
  [ "$verdict" = FAILED ] && sed -n '/^-\{20,\}$/,$p' "$logdir/run$i.log" | head -300
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
