#!/usr/bin/env bash
# Sets up, builds and runs every test label (cpu, gpu, mpi, slurm, parity); exits non-zero on
# any failure. GPU tests skip at run time, with a SKIPPED line, when no device answers.
#   scripts/test.sh                 everything
#   scripts/test.sh -L cpu          one label (any ctest arguments pass through)
# Then scripts/check_cuda_builds.sh compiles and links the program with CUDA 12 for V100 and
# with CUDA 13 for A100: 9 minutes on two busy cores in a fresh build folder, seconds once it
# holds the CUDA 12 toolkit and the two builds.
# Environment: RDDP_BUILD_DIR (default build), RDDP_CUDA_ARCHS (default: this machine's GPUs,
# else 90 alone, which keeps the build short; scripts/configure_build.sh),
# RDDP_SKIP_CUDA_BUILDS=1 skips the CUDA 12 and sm_80 builds (CI runs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RDDP_BUILD_DIR:-$root/build}
jobs=$(nproc 2>/dev/null || echo 2)

# Each phase's time goes to the log, so that a slow CI run says where its minutes went.
phase_start=$SECONDS
phase_done() { echo "test.sh: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }

"$root/scripts/setup.sh"
phase_done setup
# The CPU layers use OpenMP; tests run side by side on few cores, where threads that spin
# while they wait only steal each other's time.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

# The configuration scripts/quickstart.sh builds too, so that either reuses the other's objects.
"$root/scripts/configure_build.sh" "$build"
cmake --build "$build" -j "$jobs"
phase_done build

cd "$build"
status=0
ctest --output-on-failure -j "$jobs" "$@" || status=$?
phase_done tests
# Make every skip visible with its reason, not just ctest's "Skipped".
grep -h '^SKIPPED' Testing/Temporary/LastTest.log 2>/dev/null | sort -u || true

if [ "${RDDP_SKIP_CUDA_BUILDS:-0}" = 1 ]; then
  echo "cuda builds: SKIPPED (RDDP_SKIP_CUDA_BUILDS=1): no CUDA 12 sm_70 or CUDA 13 sm_80 build"
else
  "$root/scripts/check_cuda_builds.sh" "$PWD" || status=1
  phase_done "cuda builds"
fi
exit $status
