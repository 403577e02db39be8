#!/usr/bin/env bash
# Compiles and links resnet_ddp (host code and every kernel; no tests, no benchmarks) for the
# GPUs users benchmark on, with the toolkits they build with: CUDA 12 for V100 (sm_70, which
# CUDA 13 cannot build for) and this machine's CUDA 13 for A100 (sm_80; scripts/test.sh's own
# build covers sm_90). CUDA 12 comes from scripts/fetch_cuda12_toolkit.sh. Each build keeps its
# folder, so a second run rebuilds only what changed. One line a build on success; non-zero exit
# and the build's last lines on failure.
#   scripts/check_cuda_builds.sh [BUILD_DIR]    (default: build)
# Environment: RDDP_CUDA13_ROOT (default /usr/local/cuda).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cuda13_root=${RDDP_CUDA13_ROOT:-/usr/local/cuda}

say() { echo "cuda builds: $*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

[ -x "$cuda13_root/bin/nvcc" ] || fail "no nvcc in $cuda13_root/bin (set RDDP_CUDA13_ROOT)"

start=$SECONDS
roots=$("$root/scripts/fetch_cuda12_toolkit.sh" "$build/toolchains") ||
  fail "could not assemble the CUDA 12 toolkit (fetch_cuda12_toolkit.sh's reason above)"
cuda12_root=$(sed -n 's/^CUDA12_ROOT=//p' <<<"$roots")
cudnn12_root=$(sed -n 's/^CUDNN_ROOT=//p' <<<"$roots")
nccl12_root=$(sed -n 's/^NCCL_ROOT=//p' <<<"$roots")
say "CUDA 12 toolkit with cuDNN and NCCL ready in $((SECONDS - start)) s ($cuda12_root)"
# CUDA 12's cuobjdump reads CUDA 13's binaries too; CUDA 13 installs may lack one.
cuobjdump=$cuda12_root/bin/cuobjdump

release_of() { "$1" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p'; }

# The architectures cmake/CudaArchitectures.cmake chooses for NVCC when none are named.
default_archs_for() {
  local dir=$build/cuda-builds/default-archs
  rm -rf "$dir"
  cmake -S "$root/tests/cli/cuda_arch_defaults" -B "$dir" -DCMAKE_CUDA_COMPILER="$1" \
    >/dev/null 2>&1 || fail "configuring the architecture choice with $1 failed"
  sed -n 's/^CMAKE_CUDA_ARCHITECTURES:STRING=//p' "$dir/CMakeCache.txt"
  rm -rf "$dir"
}

# build_for NAME NVCC ARCH EXPECTED_DEFAULT_ARCHS CMAKE_ARGS...: configures build/cuda-builds/NAME
# for ARCH alone and builds resnet_ddp; then checks that the program holds only ARCH's kernels
# and loads the runtime and cuBLAS of NVCC's release.
build_for() {
  local name=$1 nvcc=$2 arch=$3 expected_default=$4
  shift 4
  local dir=$build/cuda-builds/$name release default major
  release=$(release_of "$nvcc")
  major=${release%%.*}
  default=$(default_archs_for "$nvcc")
  [ "$default" = "$expected_default" ] ||
    fail "CUDA $release's default architectures are '$default', expected '$expected_default'"

  local started=$SECONDS
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DRDDP_BUILD_TESTS=OFF \
    -DRDDP_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; fail "CUDA $release sm_$arch: configure failed (above)"; }
  local configured=$((SECONDS - started))
  started=$SECONDS
  nice cmake --build "$dir" -j "$jobs" --target resnet_ddp >"$dir/build.log" 2>&1 ||
    { tail -n 40 "$dir/build.log" >&2
      fail "CUDA $release sm_$arch: resnet_ddp did not build (last lines above; $dir/build.log)"; }
  local built=$((SECONDS - started)) compiled
  compiled=$(grep -c "Building .* object" "$dir/build.log" || true)

  local images cubins others needed library loads
  images=$("$cuobjdump" --list-elf "$dir/resnet_ddp") ||
    fail "CUDA $release sm_$arch: cuobjdump could not list resnet_ddp's kernel images"
  cubins=$(grep -c "\.sm_$arch\.cubin" <<<"$images" || true)
  others=$(grep -v "\.sm_$arch\.cubin" <<<"$images" || true)
  [ "$cubins" -gt 0 ] && [ -z "$others" ] ||
    fail "CUDA $release: resnet_ddp holds $cubins sm_$arch kernel images and also: $others"
  needed=$(readelf -d "$dir/resnet_ddp" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for library in "libcudart.so.$major" "libcublas.so.$major"; do
    grep -qx "$library" <<<"$needed" ||
      fail "CUDA $release: resnet_ddp does not load $library; it loads: $(echo $needed)"
  done
  loads=$(grep -E '^lib(cudart|cublas|cudnn|nccl)\.' <<<"$needed" | paste -sd' ')
  say "CUDA $release sm_$arch resnet_ddp built and linked in $built s ($compiled files compiled," \
    "configure $configured s; $cubins sm_$arch kernel images; loads $loads;" \
    "default architectures $default)"
}

build_for cuda12-sm70 "$cuda12_root/bin/nvcc" 70 "70;80;90" \
  -DCMAKE_CUDA_COMPILER="$cuda12_root/bin/nvcc" -DCUDNN_ROOT="$cudnn12_root" \
  -DNCCL_ROOT="$nccl12_root"
build_for cuda13-sm80 "$cuda13_root/bin/nvcc" 80 "80;90" -DCUDAToolkit_ROOT="$cuda13_root"
