#!/usr/bin/env bash
# scripts/copy_gpu_programs.sh gathers the programs a GPU machine without build tools runs. A
# stand-in build tree (real ELF files, so that strip has something to strip) and a stand-in cmake
# that logs what it was asked to build keep the real build tree out of it.
source "$(dirname "$0")/lib.sh"
script=$RDDP_SOURCE_DIR/scripts/copy_gpu_programs.sh

expect 2 "name the directory to copy into" -- "$script"
expect 2 "unknown option '--arch'" -- "$script" --arch 90 "$work/out"
expect 1 "is no CMake build; run scripts/test.sh" -- "$script" --build-dir "$work/none" "$work/out"

build=$work/build
mkdir -p "$build/tests/mpi" "$build/bench" "$work/bin"
echo "CMAKE_CUDA_ARCHITECTURES:STRING=80;90" >"$build/CMakeCache.txt"
for program in resnet_ddp resnet_ddp_pack tests/gpu_tests tests/mpi/nccl_comm_test \
               bench/cuda_step_bench bench/kernels_bench; do
  cp "$(type -P true)" "$build/$program"
done
cat >"$work/bin/cmake" <<'STANDIN'
#!/bin/sh
# --target help lists the targets, as the Makefile generator does; a build logs its targets.
case "$*" in
  *"--target help"*) echo "... resnet_ddp"; echo "... nccl_comm_test" ;;
  *) echo "$*" >>"$CMAKE_LOG" ;;
esac
STANDIN
chmod +x "$work/bin/cmake"
copy() { PATH=$work/bin:$PATH CMAKE_LOG=$work/cmake.log "$script" --build-dir "$build" "$@"; }

expect 2 "inside the build it copies from" -- copy "$build/gpu"
mkdir -p "$work/someone's"
touch "$work/someone's/notes.txt"
expect 1 "holds files and is no earlier copy" -- copy "$work/someone's"
check "a directory that is no copy keeps its files" [ -f "$work/someone's/notes.txt" ]
expect 0 "copy_gpu_programs.sh: .* in $work/gpu\$" -- copy "$work/gpu"
check "the programs were brought up to date first, nccl_comm_test with them" \
  grep -q -- "--target resnet_ddp resnet_ddp_pack gpu_tests cuda_step_bench kernels_bench nccl_comm_test" \
  "$work/cmake.log"
for program in resnet_ddp resnet_ddp_pack tests/gpu_tests tests/mpi/nccl_comm_test \
               bench/cuda_step_bench bench/kernels_bench; do
  check "$program copied in the build's layout, and it still runs" "$work/gpu/$program"
done
check "BUILT names the commit first" \
  bash -c 'head -1 "$1" | grep -qE "^([0-9a-f]{7,}|unknown)( \(with uncommitted changes\))?$"' _ "$work/gpu/BUILT"
check "BUILT names the CUDA architectures" grep -q "^CUDA architectures: 80;90; built in $build" "$work/gpu/BUILT"

# A copy replaces what the directory held: no stale program of an earlier build survives.
touch "$work/gpu/stale"
expect 0 "copy_gpu_programs.sh:" -- copy "$work/gpu"
check "an earlier copy's files are gone" [ ! -e "$work/gpu/stale" ]

# One file to carry: the archive unpacks into the same copy, under the directory's name.
expect 2 "name a .tar.gz" -- copy --archive "$work/gpu.zip" "$work/gpu"
expect 2 "is inside $work/gpu, which the copy replaces" -- copy --archive "$work/gpu/all.tar.gz" "$work/gpu"
expect 0 "copy_gpu_programs.sh: .* in $work/gpu.tar.gz \\(unpack with tar -xzf: it makes gpu/\\)" -- \
  copy --archive "$work/gpu.tar.gz" "$work/gpu"
check "no partial archive is left behind" [ ! -e "$work/gpu.tar.gz.partial" ]
mkdir "$work/elsewhere"
tar -xzf "$work/gpu.tar.gz" -C "$work/elsewhere"
check "the unpacked copy has the same BUILT" cmp "$work/gpu/BUILT" "$work/elsewhere/gpu/BUILT"
check "the unpacked gpu_tests still runs" "$work/elsewhere/gpu/tests/gpu_tests"
finish
