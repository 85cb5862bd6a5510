#!/usr/bin/env bash
# Installs what the build and the tests need on Debian 12 (bookworm) or Ubuntu 24.04 (noble), then says what is
# still missing (CUDA toolkit, NVIDIA driver, GPU) and how to fix each. Safe to run again: it installs only what is
# missing and changes nothing when everything is there. Non-interactive (apt never asks); runs as root or through
# sudo.
#
#   tools/setup.sh           install and check
#   tools/setup.sh --check   check only: install nothing, exit 1 when the build cannot work yet
#
# Exit status: 0 when the build can run (a missing GPU or driver is only a warning: everything builds and the CPU
# tests run without them), 1 when something the build needs is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "tools/setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

say() { printf '%s\n' "$*"; }
missing=()  # what stops the build, with its fix
notes=()    # what limits what can be checked here, with its fix

# ---- packages ------------------------------------------------------------------------------------------------
# The build: cmake with make (the presets' generator is CMake's default, Unix Makefiles; a minimal Debian image has
# no make), a C++ compiler, ninja; the libraries of the gates and labgrade: Catch2 v3, CLI11, toml++,
# nlohmann-json, fmt. bubblewrap: labgrade batch's sandbox. python3: the docs checks and the rubric tables;
# python3-yaml: the grader's test of the GitHub Classroom workflow. Open MPI: lab 09 (distributed matmul).
pkgs=(cmake make ninja-build g++ libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libfmt-dev bubblewrap
      python3 python3-yaml openmpi-bin libopenmpi-dev)

if [ -r /etc/os-release ]; then . /etc/os-release; fi
distro="${ID:-unknown}-${VERSION_ID:-?}"
case "$distro" in
  debian-12) catch2_pkg=libcatch2-dev; catch2_release=bookworm-backports ;;  # bookworm's own catch2 is v2
  ubuntu-24.04) catch2_pkg=catch2; catch2_release="" ;;                    # noble's catch2 is v3
  *) catch2_pkg=""; catch2_release="" ;;
esac

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
catch2_v3_installed() {
  local v
  v=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' libcatch2-dev catch2 2>/dev/null | sed -n 's/^ii *//p' | grep -o '^[0-9]*' | sort -n | tail -1)
  [ -n "$v" ] && [ "$v" -ge 3 ] || [ -f /usr/include/catch2/catch_test_macros.hpp ]
}

if [ -z "$catch2_pkg" ]; then
  say "setup: this is ${PRETTY_NAME:-an unknown system}; tools/setup.sh knows Debian 12 and Ubuntu 24.04."
  say "  Install by hand: ${pkgs[*]} and Catch2 v3 (CMake downloads any missing library when it can reach GitHub)."
  [ $check_only -eq 1 ] || notes+=("packages not installed by this script (unknown system)")
elif ! command -v apt-get >/dev/null; then
  say "setup: no apt-get on this system; install ${pkgs[*]} and Catch2 v3 by hand."
else
  todo=()
  for p in "${pkgs[@]}"; do installed "$p" || todo+=("$p"); done
  catch2_v3_installed || todo+=("$catch2_pkg")
  if [ ${#todo[@]} -eq 0 ]; then
    say "setup: every package is installed already ($distro)"
  elif [ $check_only -eq 1 ]; then
    missing+=("packages: ${todo[*]}|run tools/setup.sh without --check (as root or with sudo)")
  else
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo >/dev/null; then sudo=(sudo); else
        say "setup: not root and no sudo: run as root: apt-get install ${todo[*]}"; exit 1
      fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt=("${sudo[@]}" apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends)
    if [ -n "$catch2_release" ] && ! grep -rqs "$catch2_release" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      say "setup: adding the $catch2_release APT source (Catch2 v3 is only there)"
      echo "deb http://deb.debian.org/debian $catch2_release main" |
        "${sudo[@]}" tee "/etc/apt/sources.list.d/$catch2_release.list" >/dev/null
    fi
    say "setup: installing ${todo[*]}"
    "${sudo[@]}" apt-get update -q >/dev/null
    rest=()
    for p in "${todo[@]}"; do [ "$p" = "$catch2_pkg" ] || rest+=("$p"); done
    [ ${#rest[@]} -eq 0 ] || "${apt[@]}" install "${rest[@]}" >/dev/null
    if ! catch2_v3_installed; then
      if [ -n "$catch2_release" ]; then "${apt[@]}" install -t "$catch2_release" "$catch2_pkg" >/dev/null
      else "${apt[@]}" install "$catch2_pkg" >/dev/null; fi
    fi
    say "setup: installed ${todo[*]}"
  fi
fi

# ---- what the packages do not provide ------------------------------------------------------------------------
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

if command -v cmake >/dev/null; then
  v=$(cmake --version | head -1 | grep -o '[0-9][0-9.]*' | head -1)
  # Workflow presets (cmake --workflow) need 3.25; Debian 12 has 3.25.1, Ubuntu 24.04 3.28.
  version_ge "$v" 3.25 && say "setup: cmake $v" ||
    missing+=("cmake $v is older than 3.25|pip install cmake, or Kitware's APT repository (apt.kitware.com)")
else
  missing+=("cmake not found|apt-get install cmake (tools/setup.sh does this on Debian 12 and Ubuntu 24.04)")
fi

cuda_repo="https://developer.download.nvidia.com/compute/cuda/repos/${ID:-debian}${VERSION_ID//./}/x86_64"
nvcc=/usr/local/cuda/bin/nvcc
if [ -x "$nvcc" ]; then
  v=$("$nvcc" --version | grep -o 'release [0-9.]*' | grep -o '[0-9.]*$')
  say "setup: CUDA toolkit $v ($nvcc)"
  version_ge "$v" 13.0 ||
    missing+=("CUDA toolkit $v is older than 13.0|apt-get install cuda-toolkit-13-0 from NVIDIA's repository (docs/getting-started.md)")
  command -v nvcc >/dev/null ||
    notes+=("nvcc is not on PATH (the build finds it; compute-sanitizer and ncu are in the same folder)|echo 'export PATH=/usr/local/cuda/bin:\$PATH' >> ~/.bashrc")
else
  missing+=("no CUDA toolkit in /usr/local/cuda (nvcc)|install cuda-keyring from $cuda_repo, then apt-get install cuda-toolkit-13-0 (docs/getting-started.md, section 2)")
fi

gpu=0
if ! command -v nvidia-smi >/dev/null; then
  notes+=("no NVIDIA driver (nvidia-smi not found): everything builds and the CPU tests run, but every GPU gate is skipped|on a machine with an NVIDIA GPU: apt-get install nvidia-open (R580 or newer) from the same repository, then reboot; without a GPU, get GPU feedback from your course's autograder or a GPU machine")
elif ! smi=$(nvidia-smi 2>&1); then
  notes+=("nvidia-smi fails: ${smi%%$'\n'*}|reboot after installing the driver; in a container, start it with GPU access (docker run --gpus all)")
else
  gpus=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null || true)
  if [ -z "$gpus" ]; then
    notes+=("the driver is loaded but lists no GPU: every GPU gate is skipped|check CUDA_VISIBLE_DEVICES and the permissions of /dev/nvidia*")
  else
    gpu=1
    while IFS= read -r g; do say "setup: GPU $g"; done <<<"$gpus"
    drv=$(grep -o 'CUDA Version: [0-9.]*' <<<"$smi" | grep -o '[0-9.]*$' || true)
    if [ -n "$drv" ] && ! version_ge "$drv" 13.0; then
      notes+=("the driver supports CUDA $drv only: the gates will fail with cudaErrorInsufficientDriver|install a driver of the R580 branch or newer and reboot")
    fi
  fi
fi

# ---- summary ------------------------------------------------------------------------------------------------
for m in "${missing[@]}"; do say "MISSING  ${m%%|*}"; say "         fix: ${m#*|}"; done
for n in "${notes[@]}"; do
  say "NOTE     ${n%%|*}"
  [ "${n#*|}" = "$n" ] || say "         fix: ${n#*|}"
done
if [ ${#missing[@]} -ne 0 ]; then
  say "setup: not ready to build (see MISSING above)"
  exit 1
fi
preset=ci
[ $gpu -eq 1 ] && preset=gpu
say "setup: ready. Next: configure, build and test, then grade your code:"
say "  cmake --workflow --preset $preset"
say "  build/$preset/labgrade"
[ $gpu -eq 1 ] || say "  (no GPU here: every GPU gate will say \"skipped\", right or wrong; see docs/student-guide.md)"
