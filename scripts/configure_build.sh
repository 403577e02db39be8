#!/usr/bin/env bash
# Configures a build folder the one way scripts/quickstart.sh and scripts/test.sh share, so that
# whichever runs first compiles objects the other reuses: Release, the tests' own sources at -O1
# (tests/CMakeLists.txt), and one list of CUDA architectures, the first that applies of
#   RDDP_CUDA_ARCHS, when set;
#   the folder's own list, when it is already configured and covers every GPU nvidia-smi lists;
#   the compute capabilities of the GPUs nvidia-smi lists (80 for an A100, 90 for an H100);
#   90 where no GPU answers: nothing CUDA runs there, one architecture halves the CUDA compile
#   time, and scripts/check_cuda_builds.sh proves that sm_70 and sm_80 build too.
# A program built without its GPU's architecture stops at its first kernel with the rebuild to do.
#   scripts/configure_build.sh BUILD_DIR            configures BUILD_DIR (log in configure.log)
#   scripts/configure_build.sh --archs BUILD_DIR    only prints the architectures it would use
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
print_only=0
if [ "${1:-}" = --archs ]; then print_only=1; shift; fi
[ $# -eq 1 ] || { echo "usage: $0 [--archs] BUILD_DIR" >&2; exit 2; }
build=$1

# "80;90" for the GPUs that answer (compute capability 8.0 and 9.0); empty when none does.
gpu_archs() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    sed -n 's/^ *\([0-9]*\)\.\([0-9]*\) *$/\1\2/p' | sort -un | paste -sd';' || true
}

# Whether every architecture of the list $2 is in the list $1.
covers() {
  local arch
  for arch in ${2//;/ }; do
    [[ ";$1;" == *";$arch;"* ]] || return 1
  done
}

cached=""
[ -f "$build/CMakeCache.txt" ] &&
  cached=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
gpus=$(gpu_archs)
if [ -n "${RDDP_CUDA_ARCHS:-}" ]; then
  archs=$RDDP_CUDA_ARCHS
elif [ -n "$cached" ] && covers "$cached" "$gpus"; then
  archs=$cached
elif [ -n "$gpus" ]; then
  archs=$gpus
else
  archs=90
fi

if [ $print_only = 1 ]; then
  echo "$archs"
  exit 0
fi
if [ -n "$cached" ] && [ "$cached" != "$archs" ]; then
  echo "configure_build.sh: $build was configured for CUDA architectures $cached; now $archs" \
    "(every CUDA object compiles again)" >&2
fi
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRDDP_TEST_SOURCE_FLAGS=-O1 \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
