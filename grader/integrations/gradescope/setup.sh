#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the autograder image (with network, without a GPU). It installs
# the build tools, the libraries and the CUDA toolkit, then builds labgrade and the gates of the labs named in
# autograder.conf. Made for Ubuntu 24.04 base images (Ubuntu 22.04's CMake is older than the 3.25 the presets need);
# Debian 12 works too.
#
# Environment (for rehearsals outside Gradescope; Gradescope sets none of them):
#   AUTOGRADER_ROOT     the autograder folder (default /autograder); the zip is unpacked in $AUTOGRADER_ROOT/source
#   AUTOGRADER_INSTALL  auto (default): install only when a tool or library is missing; never: install nothing
#                       (a machine without network that has everything); always: run the installs regardless
#   AUTOGRADER_JOBS     parallel build jobs (default: nproc)
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi

ROOT=${AUTOGRADER_ROOT:-/autograder}
SOURCE=$ROOT/source
W=$SOURCE/workbook
INSTALL=${AUTOGRADER_INSTALL:-auto}
CUDA_VERSION_PKG=cuda-toolkit-13-0
NVCC=/usr/local/cuda/bin/nvcc

die() { echo "setup.sh: $*" >&2; exit 1; }
[ -d "$W" ] || die "$W does not exist (unpack the zip from make-autograder.sh into $SOURCE)"
LABS="" CUDA_ARCHITECTURES="80;90"
[ -f "$SOURCE/autograder.conf" ] && . "$SOURCE/autograder.conf"
case "$INSTALL" in auto | never | always) ;; *) die "AUTOGRADER_INSTALL must be auto, never or always (got $INSTALL)" ;; esac

# What the build needs, and where each piece is looked for.
missing=()
have_header() {  # have_header RELATIVE_PATH: in the usual include folders
  local d
  for d in /usr/include /usr/local/include /usr/include/x86_64-linux-gnu; do [ -e "$d/$1" ] && return 0; done
  return 1
}
check_tools() {
  missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v g++ >/dev/null || missing+=(g++)
  have_header catch2/catch_test_macros.hpp || missing+=("Catch2 v3")
  have_header CLI/CLI.hpp || missing+=(CLI11)
  have_header nlohmann/json.hpp || missing+=(nlohmann-json)
  have_header toml++/toml.h || missing+=("toml++")
  have_header fmt/format.h || missing+=(fmt)
  [ -x "$NVCC" ] || missing+=("CUDA toolkit ($NVCC)")
}

install_packages() {
  export DEBIAN_FRONTEND=noninteractive
  . /etc/os-release
  local pkgs="ca-certificates wget cmake ninja-build g++ libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libfmt-dev bubblewrap"
  apt-get update -qq
  if [ "${ID:-}" = debian ] && [ "${VERSION_CODENAME:-}" = bookworm ]; then
    # Catch2 v3 is only in bookworm-backports.
    grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/ ||
      echo "deb http://deb.debian.org/debian bookworm-backports main" >/etc/apt/sources.list.d/bookworm-backports.list
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $pkgs
    apt-get install -y -qq --no-install-recommends -t bookworm-backports libcatch2-dev
  else
    # Ubuntu 24.04: catch2 is v3. Elsewhere, a missing library is fetched by CMake at configure time.
    apt-get install -y -qq --no-install-recommends $pkgs
    apt-get install -y -qq --no-install-recommends catch2 || echo "setup.sh: no catch2 package: CMake will fetch Catch2"
  fi
  if [ ! -x "$NVCC" ]; then
    local distro
    case "${ID:-}${VERSION_ID:-}" in
      ubuntu24.04) distro=ubuntu2404 ;;
      ubuntu22.04) distro=ubuntu2204 ;;
      debian12) distro=debian12 ;;
      *) die "no NVIDIA CUDA repository known for ${PRETTY_NAME:-this system}: use an Ubuntu 24.04 base image" ;;
    esac
    wget -q -O /tmp/cuda-keyring.deb \
      "https://developer.download.nvidia.com/compute/cuda/repos/$distro/x86_64/cuda-keyring_1.1-1_all.deb"
    dpkg -i /tmp/cuda-keyring.deb
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$CUDA_VERSION_PKG"
  fi
}

check_tools
if [ "$INSTALL" = always ] || { [ "$INSTALL" = auto ] && [ ${#missing[@]} -gt 0 ]; }; then
  [ ${#missing[@]} -eq 0 ] || echo "setup.sh: installing (missing: ${missing[*]})"
  [ "$(id -u)" -eq 0 ] || die "installing packages needs root (or set AUTOGRADER_INSTALL=never on a prepared machine)"
  install_packages
  check_tools
elif [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: AUTOGRADER_INSTALL=never, but missing: ${missing[*]}; CMake will try to fetch the libraries" >&2
fi
[ -x "$NVCC" ] || die "no CUDA toolkit at $NVCC"
cmake_version=$(cmake --version | sed -n '1s/[^0-9]*\([0-9][0-9.]*\).*/\1/p')
printf '%s\n3.25\n' "$cmake_version" | sort -V -C -r ||
  die "CMake $cmake_version is older than 3.25 (CMakePresets.json version 6) (an Ubuntu 22.04 base image?): use Ubuntu 24.04"

# Configure and build: the ci preset (no GPU here), the architectures and labs of autograder.conf.
cd "$W"
args=(--preset ci -DLABS_BUILD_SOLUTIONS=OFF "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHITECTURES"
      "-DLABS_ONLY=$(echo $LABS | tr ' ' ';')")
command -v ninja >/dev/null && args+=(-G Ninja)
echo "setup.sh: cmake ${args[*]}"
cmake "${args[@]}"
targets=(labgrade)
for recipe in build/ci/grading/lab*.json; do
  [ -e "$recipe" ] || die "the configure step wrote no grading recipe (no lab selected?)"
  t=$(sed -n 's/.*"student_target": *"\([^"]*\)".*/\1/p' "$recipe")
  [ -n "$t" ] && targets+=("$t")
done
echo "setup.sh: building ${targets[*]}"
cmake --build build/ci -j "${AUTOGRADER_JOBS:-$(nproc)}" --target "${targets[@]}"

# The grader runs each submission under an unprivileged uid (as root): it must be able to read the build.
chmod a+rx "$ROOT" "$SOURCE" 2>/dev/null || true
chmod -R a+rX "$W"
build/ci/labgrade doctor --build-dir build/ci || true   # informational: no GPU while the image is built
echo "setup.sh: done; graded labs: $(cd build/ci/grading && ls lab*.json | sed 's/lab\(..\)\.json/\1/' | tr '\n' ' ')"
