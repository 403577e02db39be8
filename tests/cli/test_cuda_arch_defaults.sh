#!/usr/bin/env bash
# The default CUDA architectures follow the nvcc the user names, however it is named
# (-DCMAKE_CUDA_COMPILER, the CUDACXX environment variable, CUDAToolkit_ROOT as a CMake or
# environment variable): 70;80;90 for CUDA 12, which still builds for V100, 80;90 for CUDA 13,
# even when another toolkit's nvcc is first on PATH. Configure-only runs: stand-in nvccs that
# print a release for cmake/CudaArchitectures.cmake alone, then the whole project with the real
# CUDA 13 nvcc (RDDP_NVCC), whose libraries must come from the toolkit named.
source "$(dirname "$0")/lib.sh"
command -v cmake >/dev/null || failed "no cmake on PATH"

# A stand-in toolkit: bin/nvcc answers --version with RELEASE and compiles nothing.
stand_in() {
  mkdir -p "$work/cuda-$1/bin"
  printf '#!/bin/sh\necho "nvcc: NVIDIA (R) Cuda compiler driver"\n%s\n' \
    "echo \"Cuda compilation tools, release $1, V$1.0\"" >"$work/cuda-$1/bin/nvcc"
  chmod +x "$work/cuda-$1/bin/nvcc"
}
stand_in 12.4
stand_in 13.0
# As on the machine that found the fault: a CUDA 13 nvcc first on PATH.
path_with_13="$work/cuda-13.0/bin:$PATH"

runs=0
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$2/CMakeCache.txt"; }

# arch_choice EXPECTED_ARCHS EXPECTED_NVCC SOURCE_DIR [env VAR=VALUE...] -- [cmake args...]:
# a configure-only run chooses EXPECTED_ARCHS and, where CMake is told it, EXPECTED_NVCC.
arch_choice() {
  local archs=$1 nvcc=$2 source=$3 environment=()
  shift 3
  while [ "$1" != -- ]; do environment+=("$1"); shift; done
  shift
  runs=$((runs + 1))
  local dir=$work/run$runs
  env PATH="$path_with_13" "${environment[@]}" cmake -S "$source" -B "$dir" "$@" \
    >"$work/out" 2>&1 || failed "configure failed: ${environment[*]} cmake $*"
  local got
  got=$(cache_value CMAKE_CUDA_ARCHITECTURES "$dir")
  [ "$got" = "$archs" ] ||
    failed "CMAKE_CUDA_ARCHITECTURES is '$got', expected '$archs': ${environment[*]} cmake $*"
  if [ -n "$nvcc" ]; then
    got=$(cache_value CMAKE_CUDA_COMPILER "$dir")
    [ "$got" = "$nvcc" ] ||
      failed "CMAKE_CUDA_COMPILER is '$got', expected '$nvcc': ${environment[*]} cmake $*"
  fi
  checks=$((checks + 1))
  echo "ok $checks: $archs${nvcc:+ and $nvcc} from:${environment[*]:+ ${environment[*]}}" \
    "cmake -S $source $*"
  rm -rf "$dir"
}

choice=$RDDP_SOURCE_DIR/tests/cli/cuda_arch_defaults
for release in 12.4 13.0; do
  archs="80;90"
  [ "$release" = 12.4 ] && archs="70;80;90"
  nvcc=$work/cuda-$release/bin/nvcc
  arch_choice "$archs" "$nvcc" "$choice" -- -DCMAKE_CUDA_COMPILER="$nvcc"
  # CMake's CUDA language reads CUDACXX itself; the module leaves CMAKE_CUDA_COMPILER to it.
  arch_choice "$archs" "" "$choice" CUDACXX="$nvcc" --
  arch_choice "$archs" "$nvcc" "$choice" -- -DCUDAToolkit_ROOT="$work/cuda-$release"
  arch_choice "$archs" "$nvcc" "$choice" CUDAToolkit_ROOT="$work/cuda-$release" --
done
# Nothing named: nvcc on PATH.
arch_choice "80;90" "$work/cuda-13.0/bin/nvcc" "$choice" --
# A compiler named on the command line wins over the environment's.
arch_choice "70;80;90" "$work/cuda-12.4/bin/nvcc" "$choice" \
  CUDACXX="$work/cuda-13.0/bin/nvcc" -- -DCMAKE_CUDA_COMPILER="$work/cuda-12.4/bin/nvcc"
arch_choice "70;80;90" "$work/cuda-12.4/bin/nvcc" "$choice" \
  CUDACXX="$work/cuda-13.0/bin/nvcc" -- -DCUDAToolkit_ROOT="$work/cuda-12.4"
# Architectures the user names are kept.
arch_choice "86" "" "$choice" CUDACXX="$work/cuda-12.4/bin/nvcc" -- -DCMAKE_CUDA_ARCHITECTURES=86
arch_choice "75;80" "" "$choice" CUDACXX="$work/cuda-12.4/bin/nvcc" CUDAARCHS="75;80" --
expect 1 "CUDAToolkit_ROOT is .*/nowhere, which has no" -- \
  cmake -S "$choice" -B "$work/no-root" -DCUDAToolkit_ROOT="$work/nowhere"

# The whole project with the real CUDA 13 nvcc, reached through a folder of its own so that
# PATH's or /usr/local/cuda's could not pass for it.
real_nvcc=${RDDP_NVCC:-}
if [ -z "$real_nvcc" ] || [ ! -x "$real_nvcc" ]; then
  echo "SKIPPED: no real nvcc to configure the project with (set RDDP_NVCC)"
  exit 77
fi
real_release=$("$real_nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
real_archs="80;90"
[ "$real_release" -lt 13 ] && real_archs="70;80;90"
ln -s "$(cd "$(dirname "$real_nvcc")/.." && pwd)" "$work/real-cuda"
project_args=(-DRDDP_BUILD_TESTS=OFF -DRDDP_BUILD_BENCH=OFF)
arch_choice "$real_archs" "$work/real-cuda/bin/nvcc" "$RDDP_SOURCE_DIR" -- \
  -DCMAKE_CUDA_COMPILER="$work/real-cuda/bin/nvcc" "${project_args[@]}"
arch_choice "$real_archs" "$work/real-cuda/bin/nvcc" "$RDDP_SOURCE_DIR" \
  CUDACXX="$work/real-cuda/bin/nvcc" -- "${project_args[@]}"
arch_choice "$real_archs" "$work/real-cuda/bin/nvcc" "$RDDP_SOURCE_DIR" \
  CUDAToolkit_ROOT="$work/real-cuda" -- "${project_args[@]}"

# cuDNN from a toolkit of another CUDA release is refused, with the fix.
other=12.4
[ "$real_release" -lt 13 ] && other=13.0
mkdir -p "$work/cuda-$other/include" "$work/cuda-$other/lib64"
touch "$work/cuda-$other/include/cudnn.h" "$work/cuda-$other/lib64/libcudnn.so"
expect 1 "cuDNN: .*cuda-$other.* belongs to the CUDA ${other%.*} toolkit" -- \
  env PATH="$path_with_13" cmake -S "$RDDP_SOURCE_DIR" -B "$work/mixed" \
  -DCMAKE_CUDA_COMPILER="$work/real-cuda/bin/nvcc" -DCUDNN_ROOT="$work/cuda-$other" \
  "${project_args[@]}"
check "the refusal names -DCUDNN_ROOT and pip's nvidia-cudnn-cu$real_release" \
  grep -q "CUDNN_ROOT=/path/to/a cuDNN for CUDA $real_release (pip's nvidia-cudnn-cu$real_release" \
  "$work/out"
finish
