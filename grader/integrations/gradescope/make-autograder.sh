#!/usr/bin/env bash
# Builds the Gradescope autograder zip from the committed tree of this repository.
#
#   autograder.zip
#   ├── setup.sh            builds the image (grader/integrations/gradescope/setup.sh)
#   ├── run_autograder      grades one submission (grader/integrations/gradescope/run_autograder)
#   ├── autograder.conf     the labs and CUDA architectures chosen here (read by setup.sh)
#   └── workbook/           `git archive HEAD` without solutions/ and grader/fixtures/planted/
#                           (+ uncommitted tests/hidden/ with --with-hidden)
#
# Student code runs in the same container as the grader: solutions/ is never put in the zip.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: make-autograder.sh [--labs "01 02"] [--arch "80;90"] [--with-hidden] [--worktree] OUTPUT.zip

  OUTPUT.zip      where to write the zip (e.g. build/autograder.zip; its folder is created)
  --labs LIST     labs to build and grade, by number (default: all). One Gradescope assignment per lab is
                  usual: --labs 01
  --arch LIST     CUDA architectures to compile for, CMake syntax (default "80;90"). The image is built without
                  a GPU: name the grading GPU's (75: T4, 80: A100, 86: A10/RTX 30, 89: L4/L40S, 90: H100/H200)
  --with-hidden   also add every labs/NN_*/tests/hidden/ folder of the working tree, and the working tree's
                  rubric.toml of those labs (hidden gates need their rubric entries), even when not committed
  --worktree      take the working tree's files instead of HEAD: those git does not ignore (without git:
                  everything but build*/, .git, .deps, .cache, out/, grade-out*, __pycache__). For a copy of the
                  checkout without .git, e.g. on a GPU machine for rehearse.sh

Without --worktree only committed files go in (HEAD): commit first what you want graded. setup.sh and
run_autograder are always this folder's own.
EOF
}

labs="" arch="80;90" hidden=0 worktree=0 output=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --labs) [ $# -ge 2 ] || { echo "make-autograder.sh: --labs needs a value" >&2; exit 2; }; labs=$2; shift 2 ;;
    --labs=*) labs=${1#--labs=}; shift ;;
    --arch) [ $# -ge 2 ] || { echo "make-autograder.sh: --arch needs a value" >&2; exit 2; }; arch=$2; shift 2 ;;
    --arch=*) arch=${1#--arch=}; shift ;;
    --with-hidden) hidden=1; shift ;;
    --worktree) worktree=1; shift ;;
    -*) echo "make-autograder.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$output" ] || { echo "make-autograder.sh: one OUTPUT.zip only" >&2; exit 2; }; output=$1; shift ;;
  esac
done
[ -n "$output" ] || { usage >&2; exit 2; }
case "$output" in *.zip) ;; *) echo "make-autograder.sh: OUTPUT must end in .zip: $output" >&2; exit 2 ;; esac
[[ "$arch" =~ ^[0-9]+[a-z]?(\;[0-9]+[a-z]?)*$ ]] ||
  { echo "make-autograder.sh: --arch wants numbers separated by ';', e.g. \"80;90\" (got \"$arch\")" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
has_git=0
if command -v git >/dev/null && git -C "$root" rev-parse --verify -q HEAD >/dev/null 2>&1 &&
  [ "$(cd "$(git -C "$root" rev-parse --show-toplevel)" && pwd)" = "$root" ]; then
  has_git=1
fi
[ "$has_git" = 1 ] || [ "$worktree" = 1 ] ||
  { echo "make-autograder.sh: $root is not a git checkout; the zip is made from HEAD (--worktree takes the files as they are)" >&2; exit 2; }
if [ "$worktree" = 1 ]; then
  source_name="the working tree"
else
  source_name="HEAD ($(git -C "$root" rev-parse --short HEAD))"
fi
mkdir -p "$(dirname "$output")"
outdir=$(cd "$(dirname "$output")" && pwd)
output=$outdir/$(basename "$output")
case "$output" in
  "$root"/*)
    if [ "$has_git" = 1 ] && ! git -C "$root" check-ignore -q "${output#"$root"/}"; then
      echo "make-autograder.sh: note: $output is in the checkout and not ignored by git: \`labgrade release\` would copy it into the student release (write it under build/ or outside)" >&2
    fi ;;
esac

# The workbook: HEAD, or the working tree's files (those git does not ignore; without git, the .gitignore patterns).
stage=$(mktemp -d "${TMPDIR:-/tmp}/autograder.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/workbook"
if [ "$worktree" = 0 ]; then
  git -C "$root" archive --format=tar HEAD | tar -x -C "$stage/workbook"
  if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
    echo "make-autograder.sh: note: the working tree has uncommitted changes; the zip holds $source_name without them" >&2
  fi
elif [ "$has_git" = 1 ]; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf -) | tar -x -C "$stage/workbook"
else
  (cd "$root" && tar -cf - --exclude='./build*' --exclude=./.git --exclude=./.deps --exclude=./.cache --exclude=./out \
    --exclude='./grade-out*' --exclude=__pycache__ --exclude='*.pyc' .) | tar -x -C "$stage/workbook"
fi
# What labgrade release also leaves out: the reference solutions, and the planted-bug fixtures (their patches quote
# lines of the solutions).
rm -rf "$stage/workbook/solutions" "$stage/workbook/grader/fixtures/planted"

# Labs: "1 02,3" -> "01 02 03", each must exist in the workbook.
lab_list=()
for l in ${labs//,/ }; do
  [[ "$l" =~ ^[0-9]{1,2}$ ]] || { echo "make-autograder.sh: --labs wants lab numbers, e.g. \"01 02\" (got \"$l\")" >&2; exit 2; }
  l=$(printf '%02d' "$((10#$l))")
  compgen -G "$stage/workbook/labs/${l}_*/CMakeLists.txt" >/dev/null ||
    { echo "make-autograder.sh: $source_name has no lab $l (labs/${l}_*/CMakeLists.txt)" >&2; exit 2; }
  lab_list+=("$l")
done

if [ "$hidden" = 1 ]; then
  n=0
  for d in "$root"/labs/[0-9][0-9]_*/tests/hidden; do
    [ -d "$d" ] || continue
    lab=$(basename "$(dirname "$(dirname "$d")")")
    [ -d "$stage/workbook/labs/$lab" ] || { echo "make-autograder.sh: $lab is not in $source_name; skipping its hidden tests" >&2; continue; }
    mkdir -p "$stage/workbook/labs/$lab/tests"
    cp -R "$d" "$stage/workbook/labs/$lab/tests/"
    cp "$root/labs/$lab/rubric.toml" "$stage/workbook/labs/$lab/rubric.toml"
    echo "make-autograder.sh: added labs/$lab/tests/hidden/ and the working tree's labs/$lab/rubric.toml"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || echo "make-autograder.sh: note: --with-hidden, but no labs/*/tests/hidden/ folder exists" >&2
elif [ "$worktree" = 0 ] && compgen -G "$root/labs/[0-9][0-9]_*/tests/hidden" >/dev/null &&
  [ -n "$(git -C "$root" ls-files --others -- 'labs/*/tests/hidden/*')" ]; then
  echo "make-autograder.sh: note: uncommitted labs/*/tests/hidden/ files exist and are NOT in the zip (add --with-hidden)" >&2
fi

cp "$here/setup.sh" "$here/run_autograder" "$stage/"
chmod 755 "$stage/setup.sh" "$stage/run_autograder"
{
  echo "# written by make-autograder.sh from $source_name"
  echo "LABS=\"${lab_list[*]}\""
  echo "CUDA_ARCHITECTURES=\"$arch\""
} >"$stage/autograder.conf"

rm -f "$output"
if command -v zip >/dev/null; then
  (cd "$stage" && zip -qr -X "$output" setup.sh run_autograder autograder.conf workbook)
elif command -v python3 >/dev/null; then
  (cd "$stage" && python3 -m zipfile -c "$output" setup.sh run_autograder autograder.conf workbook)
else
  echo "make-autograder.sh: needs zip or python3 to write the zip" >&2
  exit 2
fi
echo "wrote $output ($(du -k "$output" | cut -f1) KiB): labs ${lab_list[*]:-all}, CUDA architectures $arch, from $source_name"
