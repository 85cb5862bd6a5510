#!/usr/bin/env bash
# reference-results.sh: measure every lab on this machine's GPU and regenerate docs/reference-results.md, the
# measured-results tables of the lab READMEs and the plots in docs/results/. Run from anywhere in the checkout:
#
#   tools/reference-results.sh [--labs "01 04"] [--quick] [--no-build] [--build-dir DIR] [--timeout SECONDS]
#
#   --labs "NN ..."   redo these labs only; the other labs' CSVs and metadata stay as they are
#   --quick           the benches' short sweeps (one run each); recorded as such in meta.json and the captions
#   --no-build        use the benches already built
#   --build-dir DIR   build (or, with --no-build, find) the benches in DIR instead of the gpu preset's build/gpu
#   --timeout S       time limit of each bench (default 900 s); a bench that hits it is killed and reported
#
# Steps: configure and build the benches with the gpu preset (cmake --preset gpu; cmake --build --preset gpu);
# run build/gpu/labs/*/labNN_bench_solution --csv FILE for each lab, under the time limit; when a bench succeeds,
# replace docs/results/labNN.csv and record its run in docs/results/meta.json (GPU, SMs and compute capability
# from the bench's own first line, driver from nvidia-smi, toolkit from nvcc --version, date -u, commit from
# git rev-parse --short HEAD with "-dirty" when files outside docs/ differ from it, "unknown" outside a git
# checkout, and the bench mode); then run tools/reference_results.py, which rewrites the generated regions of
# the docs and redraws the plots (when matplotlib is importable; PYTHON=... picks the interpreter).
# A failed or timed-out bench leaves that lab's CSV and metadata as they were; the others are still written.
# Logs (each bench's output, build logs, the CSV of a failed run): build/reference-results/ (or $OUT).
# Exit status: 0 every bench ran, 1 a step failed (see the summary), 2 bad usage.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
need() { [ "$2" -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }; }

all_labs="01 02 03 04 05 06 07"
labs_arg=$all_labs quick=0 build=1 build_dir="" limit=900
while [ $# -gt 0 ]; do
  case "$1" in
    --labs) need "$1" $#; labs_arg=$2; shift ;;
    --labs=*) labs_arg=${1#*=} ;;
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --build-dir) need "$1" $#; build_dir=$2; shift ;;
    --build-dir=*) build_dir=${1#*=} ;;
    --timeout) need "$1" $#; limit=$2; shift ;;
    --timeout=*) limit=${1#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
case "$limit" in ''|*[!0-9]*) echo "--timeout needs a whole number of seconds, got '$limit'" >&2; exit 2 ;; esac

# The labs to run, as two-digit numbers ("1,4" and "01 04" both work).
labs=()
read -r -a words <<< "${labs_arg//,/ }"
for w in "${words[@]}"; do
  case "$w" in *[!0-9]*) echo "--labs: '$w' is not a lab number" >&2; exit 2 ;; esac
  n=$(printf '%02d' "$((10#$w))")
  case " $all_labs " in *" $n "*) ;; *) echo "--labs: there is no lab $n (labs: $all_labs)" >&2; exit 2 ;; esac
  case " ${labs[*]:-} " in *" $n "*) ;; *) labs+=("$n") ;; esac
done
[ ${#labs[@]} -gt 0 ] || { echo "--labs: no lab given" >&2; exit 2; }

custom_build=1
if [ -z "$build_dir" ]; then
  build_dir=$root/build/gpu custom_build=0
else
  case "$build_dir" in /*) ;; *) build_dir=$root/$build_dir ;; esac
fi
results=$root/docs/results
logs=${OUT:-$root/build/reference-results}
py=${PYTHON:-python3}
mkdir -p "$logs" "$results" || exit 1
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 ))"; }
say() { echo "$*" | tee -a "$logs/summary.txt"; }
: > "$logs/summary.txt"

# ---- what the run is recorded with (taken before anything in the checkout changes)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
toolkit=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1)
smi_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
smi_cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
if commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null); then
  # Changes to the docs and the lab walkthroughs (e.g. an earlier run of this script) do not change what the
  # benches measure.
  if [ -n "$(git -C "$root" status --porcelain --untracked-files=no -- . ':(exclude)docs' ':(exclude)labs/*/README.md' 2>/dev/null)" ]; then
    commit=$commit-dirty
  fi
else
  commit=unknown
fi
day=$(date -u +%Y-%m-%d)
mode=full flag=()
if [ $quick -eq 1 ]; then mode=quick flag=(--quick); fi

say "== reference results $(date -u +%Y-%m-%dT%H:%MZ): labs ${labs[*]}, $mode sweeps, limit ${limit} s per bench"
say "   GPU ${smi_name:-unknown (no nvidia-smi)}, driver ${driver:-unknown}, CUDA ${toolkit:-unknown}, commit $commit"
command -v "$py" > /dev/null || { say "no $py: tools/reference_results.py needs python3"; exit 1; }

# ---- build
if [ $build -eq 1 ]; then
  targets=()
  for n in "${labs[@]}"; do targets+=("lab${n}_bench_solution"); done
  if [ $custom_build -eq 0 ]; then
    configure=(cmake --preset gpu)
    compile=(cmake --build --preset gpu --target "${targets[@]}")
  else
    configure=(cmake --preset gpu -B "$build_dir")
    compile=(cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}")
  fi
  say "configure: ${configure[*]}"
  if ! "${configure[@]}" > "$logs/configure.log" 2>&1; then
    say "CONFIGURE FAILED [$(elapsed) s]: $logs/configure.log"; tail -30 "$logs/configure.log"; exit 1
  fi
  say "build: ${compile[*]}"
  if ! "${compile[@]}" > "$logs/build.log" 2>&1; then
    say "BUILD FAILED [$(elapsed) s]: $logs/build.log"; grep -E 'error|Error' "$logs/build.log" | head -40; exit 1
  fi
  say "build ok [$(elapsed) s]"
fi

# ---- benches
records=() failed=()
i=0
for n in "${labs[@]}"; do
  i=$((i + 1))
  tag="[$i/${#labs[@]}] lab$n"
  bin=""
  for b in "$build_dir"/labs/*/"lab${n}_bench_solution"; do
    if [ -x "$b" ]; then bin=$b; break; fi
  done
  if [ -z "$bin" ]; then
    say "$tag: no $build_dir/labs/*/lab${n}_bench_solution (not built; without solutions/ there are no solution benches)"
    failed+=("lab$n (not built)"); continue
  fi
  csv=$logs/lab$n.csv log=$logs/lab$n.txt
  rm -f "$csv"
  say "$tag: ${bin#"$root"/} --csv ${csv#"$root"/}${flag[*]:+ ${flag[*]}} ..."
  s=$(date +%s)
  timeout --kill-after=30 "$limit" "$bin" --csv "$csv" ${flag[@]+"${flag[@]}"} > "$log" 2>&1
  rc=$?
  d=$(( $(date +%s) - s ))
  rows=0
  [ -s "$csv" ] && rows=$(( $(wc -l < "$csv") - 1 ))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "$tag: TIMEOUT, killed after $d s (limit $limit s, raise it with --timeout); docs/results/lab$n.csv kept;" \
        "the $rows rows it wrote: ${csv#"$root"/} [total $(elapsed) s]"
    failed+=("lab$n (timeout after $d s)")
  elif [ $rc -ne 0 ]; then
    say "$tag: FAILED, exit $rc after $d s; docs/results/lab$n.csv kept; output: ${log#"$root"/} [total $(elapsed) s]"
    tail -5 "$log" | sed 's/^/    /'
    failed+=("lab$n (exit $rc)")
  elif [ $rows -lt 1 ]; then
    say "$tag: wrote no measurements after $d s; docs/results/lab$n.csv kept; output: ${log#"$root"/}"
    failed+=("lab$n (no rows)")
  else
    cp "$csv" "$results/lab$n.csv"
    records+=(--record "$n=$log")
    say "$tag: ok in $d s, $rows rows -> docs/results/lab$n.csv [total $(elapsed) s]"
  fi
done

# ---- metadata, tables, plots
meta=(--meta "driver=${driver:-unknown}" --meta "toolkit=${toolkit:-unknown}" --meta "date=$day"
      --meta "commit=$commit" --meta "mode=$mode" --meta "gpu=${smi_name:-unknown}")
[ -n "$smi_cc" ] && meta+=(--meta "compute_capability=$smi_cc")
say "tables: $py tools/reference_results.py"
"$py" tools/reference_results.py ${records[@]+"${records[@]}"} "${meta[@]}" 2>&1 | tee -a "$logs/summary.txt"
gen=${PIPESTATUS[0]}
[ "$gen" -eq 0 ] || failed+=("tools/reference_results.py (exit $gen)")

if [ ${#failed[@]} -gt 0 ]; then
  say "== done in $(elapsed) s, with failures: ${failed[*]}"
  exit 1
fi
say "== done in $(elapsed) s; review with: git diff docs/ labs/*/README.md"
