#!/usr/bin/env bash
# Copies the programs that run on a GPU, stripped, from a build into DIR in the build tree's own
# layout, for a GPU machine that has the CUDA, cuDNN and NCCL libraries but no compiler or MPI
# headers to build with (a cloud node, a container beside PyTorch):
#
#   scripts/copy_gpu_programs.sh [--build-dir build] [--archive FILE.tar.gz] DIR
#
# --archive also packs DIR into one gzip file, about a quarter of its size (17 MB against 61 MB
# for sm_90), for a machine reached by copying files: there, `tar -xzf FILE.tar.gz -C PLACE`
# makes PLACE/NAME, NAME being DIR's last component.
#
# It first brings those programs up to date in the build (cmake --build, which keeps the build's
# CUDA architectures: scripts/test.sh's build has 90; set RDDP_CUDA_ARCHS for another GPU). Then,
# on the GPU machine, from a checkout of the same commit:
#
#   RDDP_BUILD_DIR=DIR RDDP_COMMIT="$(head -1 DIR/BUILT)" scripts/gpu_check.sh ...
#   RDDP_COMMIT="$(head -1 DIR/BUILT)" bench/run_throughput.sh --prebuilt --build-dir DIR ...
#
# The programs load Open MPI's libmpi at start, even for one process: that machine needs an MPI
# runtime of the same ABI on LD_LIBRARY_PATH. DIR/BUILT says what was copied: the commit (marked
# when the tree had uncommitted changes), the CUDA architectures, and each program's size.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build out="" archive=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=${2:?--build-dir needs a directory}; shift ;;
    --archive) archive=${2:?--archive needs a file name ending in .tar.gz}; shift
       [[ $archive == *.tar.gz || $archive == *.tgz ]] ||
         { echo "copy_gpu_programs.sh: --archive $archive: name a .tar.gz (or .tgz) file" >&2; exit 2; } ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "copy_gpu_programs.sh: unknown option '$1'; see $0 --help" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "copy_gpu_programs.sh: one DIR only, got '$out' and '$1'" >&2; exit 2; }
       out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || { echo "copy_gpu_programs.sh: name the directory to copy into; see $0 --help" >&2; exit 2; }
[ -f "$build/CMakeCache.txt" ] ||
  { echo "copy_gpu_programs.sh: $build is no CMake build; run scripts/test.sh (or cmake) first, or name one with --build-dir" >&2; exit 1; }
out_real=$(realpath -m "$out")
[[ $out_real != "$(realpath "$build")" && $out_real != "$(realpath "$build")"/* ]] ||
  { echo "copy_gpu_programs.sh: $out is inside the build it copies from; name a directory beside it" >&2; exit 2; }
if [ -n "$archive" ]; then
  archive_real=$(realpath -m "$archive")
  [[ $archive_real != "$out_real"/* ]] ||
    { echo "copy_gpu_programs.sh: --archive $archive is inside $out, which the copy replaces; name a file beside it" >&2; exit 2; }
fi

# Each program and its place in the build tree; nccl_comm_test exists only where CMake found an
# mpiexec to run its tests with.
programs=(resnet_ddp resnet_ddp_pack tests/gpu_tests bench/cuda_step_bench bench/kernels_bench)
known_targets=$(cmake --build "$build" --target help 2>/dev/null || true)
if grep -qw nccl_comm_test <<<"$known_targets"; then programs+=(tests/mpi/nccl_comm_test); fi
targets=()
for program in "${programs[@]}"; do targets+=("$(basename "$program")"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+=" (with uncommitted changes)"
# Only an earlier copy is replaced (its BUILT says it is one), so that a mistyped DIR never
# costs anyone's files.
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
  [ -f "$out/BUILT" ] ||
    { echo "copy_gpu_programs.sh: $out holds files and is no earlier copy (no BUILT in it); name a new or empty directory" >&2; exit 1; }
  rm -rf "$out"
fi
mkdir -p "$out"
{
  echo "$commit"
  echo "CUDA architectures: ${archs:-unknown}; built in $build on $(date -u '+%Y-%m-%d %H:%M UTC')"
} >"$out/BUILT"
for program in "${programs[@]}"; do
  mkdir -p "$out/$(dirname "$program")"
  # Debug sections are most of each file; the GPU code and its line table (-lineinfo, for
  # compute-sanitizer and the profilers) live in the CUDA fat binary, which strip keeps.
  strip --strip-debug -o "$out/$program" "$build/$program"
  printf '%-28s %6s\n' "$program" "$(du -h "$out/$program" | cut -f1)" >>"$out/BUILT"
done
cat "$out/BUILT"
echo "copy_gpu_programs.sh: $(du -sh "$out" | cut -f1) in $out"
if [ -n "$archive" ]; then
  # Written beside its final name and renamed, so that an interrupted run never leaves a
  # truncated archive that looks whole.
  tar -czf "$archive.partial" -C "$(dirname "$out_real")" "$(basename "$out_real")"
  mv "$archive.partial" "$archive"
  echo "copy_gpu_programs.sh: $(du -h "$archive" | cut -f1) in $archive (unpack with tar -xzf: it makes $(basename "$out_real")/)"
fi
