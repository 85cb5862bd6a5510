#!/usr/bin/env bash
# Rehearses the Gradescope autograder on this machine, without Gradescope: builds the zip with
# make-autograder.sh, unpacks it into a fake autograder root, runs setup.sh there (without installing anything),
# then runs run_autograder on these submissions and checks each results.json (check-results.py):
#   solutions      the reference solutions' files at labs/*/student/, one folder deep (a repository submission)
#   empty          nothing
#   compile-error  the solutions, with the first lab's file broken so that it does not compile
#   single-file    only the first lab's solution file, uploaded on its own (no folders)
# Expectations: with a GPU (`nvidia-smi -L` works) the solutions score full marks; without one every GPU gate is
# skipped and every CPU gate passes. The workbook's own solutions/ are only read here, to make the submissions: the
# zip has none (checked).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: rehearse.sh [--labs "01"] [--arch LIST] [--work DIR] [--keep] [--install] [--worktree]

  --labs LIST   labs to build and grade (default: all; "01" is the quick one)
  --arch LIST   CUDA architectures (default: the GPU's, from nvidia-smi; 90 without a GPU)
  --work DIR    where the zip, the fake autograder root and the logs go (default: a new folder in /tmp)
  --keep        keep the work folder when everything passed (it is always kept after a failure)
  --install     let setup.sh install what is missing (AUTOGRADER_INSTALL=auto; needs network and root)
  --worktree    zip the working tree's files instead of HEAD (make-autograder.sh --worktree); automatic when
                this copy of the workbook has no .git
Extra `labgrade batch` options for run_autograder: LABGRADE_BATCH_OPTIONS="--sandbox none" rehearse.sh ...
Exit status 0 when every check passed.
EOF
}

labs="" arch="" work="" keep=0 install=never worktree=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --labs) labs=${2:?--labs needs a value}; shift 2 ;;
    --arch) arch=${2:?--arch needs a value}; shift 2 ;;
    --work) work=${2:?--work needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --install) install=auto; shift ;;
    --worktree) worktree=1; shift ;;
    *) echo "rehearse.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
command -v python3 >/dev/null || { echo "rehearse.sh: needs python3 (to check results.json)" >&2; exit 2; }
command -v unzip >/dev/null || command -v python3 >/dev/null || { echo "rehearse.sh: needs unzip" >&2; exit 2; }

gpu=no
if nvidia-smi -L >/dev/null 2>&1; then gpu=yes; fi
if [ -z "$arch" ]; then
  arch=90
  if [ "$gpu" = yes ]; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    [[ "$cc" =~ ^[0-9]+$ ]] && arch=$cc
  fi
fi
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/rehearse-gradescope.XXXXXX")
else
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  rm -rf "$work/autograder" "$work/submissions" "$work/logs" "$work/autograder.zip"
fi
chmod 755 "$work"   # run_autograder grades as an unprivileged uid when run as root: it must reach the build
mkdir -p "$work/logs"
fails=0
summary=()
record() {  # record STATUS TEXT
  summary+=("$1  $2")
  echo "$1  $2"
  [ "$1" = PASS ] || fails=$((fails + 1))
}

echo "== rehearsal in $work (GPU: $gpu, CUDA architectures: $arch, labs: ${labs:-all})"

# 1. The zip.
mk_args=(--arch "$arch")
if [ "$worktree" = 0 ] && ! git -C "$repo" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  echo "rehearse.sh: $repo is not a git checkout: zipping the working tree's files (--worktree)"
  worktree=1
fi
[ "$worktree" = 1 ] && mk_args+=(--worktree)
[ -n "$labs" ] && mk_args+=(--labs "$labs")
"$here/make-autograder.sh" "${mk_args[@]}" "$work/autograder.zip"
listing=$(unzip -Z1 "$work/autograder.zip" 2>/dev/null || python3 -m zipfile -l "$work/autograder.zip" | awk 'NR>1 {print $1}')
for f in setup.sh run_autograder autograder.conf workbook/CMakeLists.txt; do
  grep -qx "$f" <<<"$listing" && record PASS "zip: has $f" || record FAIL "zip: has $f"
done
grep -q '^workbook/solutions/' <<<"$listing" && record FAIL "zip: no solutions/" || record PASS "zip: no solutions/"
grep -q '^workbook/grader/fixtures/planted/' <<<"$listing" && record FAIL "zip: no planted fixtures (they quote the solutions)" ||
  record PASS "zip: no planted fixtures (they quote the solutions)"

# 2. The fake autograder root, laid out as Gradescope does.
ag=$work/autograder
mkdir -p "$ag/source" "$ag/submission" "$ag/results"
if command -v unzip >/dev/null; then unzip -q "$work/autograder.zip" -d "$ag/source"; else python3 -m zipfile -e "$work/autograder.zip" "$ag/source"; fi
chmod +x "$ag/source/setup.sh" "$ag/source/run_autograder"   # python's zipfile does not restore modes
cp "$ag/source/run_autograder" "$ag/run_autograder"
echo "== setup.sh (log: $work/logs/setup.log)"
start=$SECONDS
if (cd "$ag/source" && AUTOGRADER_ROOT="$ag" AUTOGRADER_INSTALL=$install bash ./setup.sh) >"$work/logs/setup.log" 2>&1; then
  record PASS "setup.sh builds the autograder ($((SECONDS - start)) s)"
else
  record FAIL "setup.sh builds the autograder (see $work/logs/setup.log)"
  tail -n 30 "$work/logs/setup.log"
  printf '%s\n' "" "== summary" "${summary[@]}"
  echo "REHEARSAL: FAIL (work folder kept: $work)"
  exit 1
fi
graded=$(cd "$ag/source/workbook/build/ci/grading" && ls lab*.json | sed 's/^lab\(..\)\.json$/\1/' | paste -sd, -)
first=${graded%%,*}
first_dir=$(cd "$repo/labs" && ls -d "${first}"_* | head -n 1)
echo "== graded labs: $graded"

# 3. The submissions (from this checkout's solutions/, which the zip does not contain).
subs=$work/submissions
mkdir -p "$subs/solutions/cuda-labs-main" "$subs/empty" "$subs/compile-error/my-repo" "$subs/single-file"
for sol in "$repo"/solutions/[0-9][0-9]_*/*; do
  [ -f "$sol" ] || continue
  lab=$(basename "$(dirname "$sol")")
  for s in solutions/cuda-labs-main compile-error/my-repo; do
    mkdir -p "$subs/$s/labs/$lab/student"
    cp "$sol" "$subs/$s/labs/$lab/student/"
  done
done
[ -d "$subs/solutions/cuda-labs-main/labs/$first_dir" ] ||
  { echo "rehearse.sh: $repo/solutions/$first_dir is missing: the rehearsal needs the reference solutions" >&2; exit 2; }
echo "Solutions copied into a repository layout, as GitHub would submit them." >"$subs/solutions/cuda-labs-main/README.md"
for f in "$subs/compile-error/my-repo/labs/$first_dir/student/"*; do
  printf '\nthis line is not C++ // rehearsal: a compile error\n' >>"$f"
done
cp "$repo/solutions/$first_dir/"* "$subs/single-file/"

# 4. One run_autograder per submission, each in a clean submission/results folder.
run_case() {  # run_case NAME EXPECTATION
  local name=$1 expect=$2 start=$SECONDS
  rm -rf "$ag/submission" "$ag/results"
  mkdir -p "$ag/submission" "$ag/results"
  cp -R "$subs/$name/." "$ag/submission/"
  echo "== run_autograder: $name (log: $work/logs/$name.log)"
  if (cd "$ag" && AUTOGRADER_ROOT="$ag" "$ag/run_autograder") >"$work/logs/$name.log" 2>&1; then
    record PASS "$name: run_autograder exits 0 ($((SECONDS - start)) s)"
  else
    record FAIL "$name: run_autograder exits 0 (see $work/logs/$name.log)"
  fi
  if [ ! -s "$ag/results/results.json" ]; then
    record FAIL "$name: results.json written"
    tail -n 20 "$work/logs/$name.log"
    return
  fi
  cp "$ag/results/results.json" "$work/logs/$name.results.json"
  local line
  while IFS= read -r line; do
    case "$line" in
      PASS*) record PASS "${line#PASS  }" ;;
      FAIL*) record FAIL "${line#FAIL  }" ;;
      *) echo "$line" ;;
    esac
  done < <(python3 "$here/check-results.py" "$ag/results/results.json" --name "$name" --labs "$graded" \
             --gpu "$gpu" --expect "$expect" 2>&1 || true)
}
run_case solutions solutions
run_case empty empty
run_case compile-error "compile-error:$first"
run_case single-file "only:$first"

printf '%s\n' "" "== summary (GPU: $gpu, labs: $graded)" "${summary[@]}"
if [ "$fails" -eq 0 ]; then
  echo "REHEARSAL: PASS"
  [ "$keep" = 1 ] || rm -rf "$work"
  exit 0
fi
echo "REHEARSAL: FAIL ($fails check(s); work folder kept: $work)"
exit 1
