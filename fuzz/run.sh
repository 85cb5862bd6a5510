#!/usr/bin/env bash
# Builds the Matrix Market fuzzer with clang and runs it.
#   fuzz/run.sh [SECONDS=120] [extra libFuzzer flags...]
# Work files go to build/fuzz/: corpus/ (what the fuzzer learned; seeded from common/tests/mmio_corpus) and
# artifacts/ (crash-*, leak-*, timeout-*, oom-* inputs). A crash input is a bug: fix it, then copy the file to
# common/tests/mmio_corpus/regressions/ so that labkit_tests replays it forever.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-120}"
shift || true
build="${FUZZ_BUILD_DIR:-$root/build/fuzz}"
cxx="${CXX_FUZZ:-clang++}"

cmake -S "$root/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2

mkdir -p "$build/corpus" "$build/artifacts"
# The seeds, minus the README (the regressions are seeds too: they sit next to the bugs already found).
find "$root/common/tests/mmio_corpus" -type f ! -name README.md -exec cp -n {} "$build/corpus/" \;

# -max_len: a Matrix Market file's structure shows within 4 KB; longer inputs only slow the search.
# -timeout: any single input taking 10 s is a hang (the reader is linear in the input).
# -rss_limit_mb / -malloc_limit_mb: an allocation the limits should have refused shows up as an OOM report.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"$build/fuzz_mmio" "$build/corpus" \
  -dict="$root/fuzz/mmio.dict" \
  -artifact_prefix="$build/artifacts/" \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -print_final_stats=1 "$@" || status=$?

if compgen -G "$build/artifacts/*" >/dev/null; then
  echo "fuzz/run.sh: findings in $build/artifacts/ (reproduce: $build/fuzz_mmio FILE):"
  ls -l "$build/artifacts/"
fi
exit "$status"
