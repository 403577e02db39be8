#!/usr/bin/env bash
# Builds the library and the CPU and MPI test programs with AddressSanitizer and
# UndefinedBehaviorSanitizer (gcc) in their own build directory, and runs the cpu and mpi
# tests there: any sanitizer report fails the test it occurs in. Exits non-zero on any failure.
#   scripts/test_sanitizers.sh              labels cpu and mpi, but the four long training runs
#   scripts/test_sanitizers.sh -L 'cpu|mpi' every test of both labels (ctest arguments replace
#                                           the default selection)
#   scripts/test_sanitizers.sh --build-only configures and builds, runs nothing
# .ci/nightly runs it (about 15 minutes on two cores: too long for every commit's CI).
# The CPU executor runs about 15 times slower under the sanitizers (a 2-step synthetic run: 41 s
# against 2.8 s), so cli.test_resume, cli.test_faults, cli.test_plot_precision_curves and
# mpi.trainer_np2 and mpi.pbs_scripts, which train ResNet-18 for dozens of steps (the PBS test
# also gives its ranks PBS's 10 s between SIGTERM and SIGKILL to checkpoint), and
# cli.test_preempt_eval, which waits at most 60 s for its run to start evaluating, would take
# many minutes each on two cores, or miss their deadlines; the ordinary build runs them. cli.test_bad_input and cli.test_pack still run the whole
# program, training included, for a step. The emulated CUDA engine's tests (cpu.emu_engine.*,
# tests/emu/README.md) train for minutes in the ordinary build, and the programs built on that
# engine (mpi.emu_*, cli.test_cuda_trainer_emulated, cli.test_run_throughput,
# cli.test_run_gpu_tests) with them; they are left out here and their programs are not built.
# The kernel tests' second run in reverse thread order (cpu.emu_reverse.*) checks ordering,
# which the first run here already covers for the sanitizers, so it is left out too. So are
# cli.test_gpu_check_budget, cli.test_kernel_ptx_diff, cli.test_kernel_registers,
# cli.test_compare_throughput and cli.test_copy_gpu_programs: they run scripts against stand-ins
# and nvcc, no program of this build (about 60 s of CPU here).
# Environment: RDDP_ASAN_BUILD_DIR (default build-asan), RDDP_CUDA_ARCHS (default 90-virtual:
# the kernels as PTX only, which spares ptxas, a third of their compile time; no test here runs
# device code, and a GPU would compile the PTX when loading it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
build=${RDDP_ASAN_BUILD_DIR:-$root/build-asan}
jobs=$(nproc 2>/dev/null || echo 2)

# Each phase's time goes to the log, so that a slow CI run says where its minutes went.
phase_start=$SECONDS
phase_done() { echo "test_sanitizers.sh: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }

"$root/scripts/setup.sh" --build-only
phase_done setup
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

# -O2 for the library: the cli tests train ResNet-18 for a few steps, which at -O1 under the
# sanitizers takes minutes each. The tests' own sources, heavy templates that run little, build
# at -O0: against -O1, measured on 2 cores, their compilation took about 150 s of CPU less and
# their tests about 60 s more. -g1 keeps the line tables the reports name lines from, and builds
# faster than -g.
# Two checks stay recoverable only so that tests/sanitizers/ubsan.supp can name benign reports
# in third-party headers; halt_on_error below still stops at any other.
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all"
sanitize+=" -fsanitize-recover=shift-base,nonnull-attribute -fno-omit-frame-pointer"
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" -DRDDP_TEST_SOURCE_FLAGS=-O0 \
  -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" -DRDDP_BUILD_BENCH=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="${RDDP_CUDA_ARCHS:-90-virtual}" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
# Only the programs of the cpu and mpi tests: the GPU tests take long to build, and the
# sanitizers see none of the device code they exercise.
# emulated_kernel_tests runs kernels/*.cu on the CPU (tests/emu): its fibers tell ASan of every
# stack switch, so the sanitizers see the kernels' host-side code and their emulated threads.
# nvtx_recorder: the NVTX tool the profiling tests load into resnet_ddp; rddp_hang_open: the
# stand-in for a hung mount that cli.test_hostile_data preloads.
targets=(unit_tests emulated_kernel_tests resnet_ddp resnet_ddp_pack nvtx_recorder rddp_hang_open)
for source in "$root"/tests/mpi/*.cpp; do targets+=("$(basename "$source" .cpp)"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
phase_done build
[ $build_only -eq 0 ] || exit 0

# halt_on_error: the first report ends the program, so it fails its test. protect_shadow_gap=0
# lets the CUDA runtime, which the library links, map the memory it wants (its device probe
# fails otherwise). The suppressions name third-party code only; see the files.
supp="$root/tests/sanitizers"
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:protect_shadow_gap=0:fast_unwind_on_malloc=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$supp/lsan.supp:print_suppressions=0}

cd "$build"
[ $# -gt 0 ] || set -- -L "cpu|mpi" \
  -E "^(cli[.]test_resume|cli[.]test_faults|cli[.]test_preempt_eval|cli[.]test_plot_precision_curves|mpi[.]trainer_np2|mpi[.]pbs_scripts|cpu[.]emu_engine[.].*|cpu[.]emu_reverse[.].*|mpi[.]emu_.*|cli[.]test_cuda_trainer_emulated|cli[.]test_run_throughput|cli[.]test_run_gpu_tests|cli[.]test_gpu_check_budget|cli[.]test_kernel_ptx_diff|cli[.]test_kernel_registers|cli[.]test_compare_throughput|cli[.]test_copy_gpu_programs)$"
status=0
ctest --output-on-failure -j "$jobs" "$@" || status=$?
phase_done tests
grep -h '^SKIPPED' Testing/Temporary/LastTest.log 2>/dev/null | sort -u || true
exit $status
