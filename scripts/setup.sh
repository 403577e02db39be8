#!/usr/bin/env bash
# Installs what resnet_ddp needs to build and test, from Debian's packages, when run as root
# and something is missing; otherwise prints exactly what to install. Idempotent and quiet
# when everything is there.
#   scripts/setup.sh              build + test dependencies
#   scripts/setup.sh --build-only only what the build needs (e.g. on a cluster login node)
#   scripts/setup.sh --fuzz       the build plus clang's fuzzer and sanitizer runtimes
#                                 (scripts/fuzz.sh)
set -euo pipefail

build_packages=(cmake make g++ zlib1g-dev libjpeg62-turbo-dev libopenmpi-dev openmpi-bin doctest-dev
                libstb-dev)
# PyTorch (CPU) is the outside oracle of the parity tests; Fashion-MNIST is the built-in data
# set; Pillow and matplotlib serve the benchmark and plotting scripts.
# A local one-node Slurm serves the slurm tests (scripts/local_slurm.sh); Slurm's PMIx plugin
# (in slurm-wlm-basic-plugins) loads libpmix.so from libpmix-dev to start Open MPI ranks.
test_packages=(python3-torch python3-torchvision python3-numpy python3-pil python3-matplotlib
               dataset-fashion-mnist munge slurmctld slurmd slurm-client libpmix-dev)

# libFuzzer and the sanitizer runtimes come with clang's compiler-rt; clang's OpenMP is libomp.
fuzz_packages=(clang libclang-rt-dev libomp-dev)

wanted=("${build_packages[@]}")
case "${1:-}" in
  --build-only) ;;
  --fuzz) wanted+=("${fuzz_packages[@]}") ;;
  *) wanted+=("${test_packages[@]}") ;;
esac

say() { echo "setup.sh: $*" >&2; }

check_cuda() {
  local nvcc
  nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || [ -x /usr/local/cuda/bin/nvcc ] && return 0
  say "no CUDA toolkit found (nvcc). Install NVIDIA's CUDA Toolkit 12 or 13 with cuDNN 9 and NCCL 2"
  say "  (NVIDIA's apt repository: cuda-toolkit, cudnn9-cuda-13, libnccl-dev), or on a cluster:"
  say "  module load cuda cudnn nccl"
  return 1
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  say "not a Debian-based system: install the equivalents of: ${wanted[*]}"
  say "(on a cluster: module load cmake gcc openmpi cuda cudnn nccl; doctest and stb (for the tests) are header-only)"
  check_cuda || true
  exit 1
fi

missing=()
for package in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing Debian packages; install them with:"
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  # A mirror that drops a connection now and then should not fail a fresh machine's set-up:
  # apt retries each download, and the whole update and install is tried three times.
  apt_install() {
    apt-get -o Acquire::Retries=3 update -qq &&
      apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends "${missing[@]}"
  }
  installed=0
  for attempt in 1 2 3; do
    if apt_install >>"$log" 2>&1; then installed=1; break; fi
    [ $attempt -eq 3 ] || { say "apt-get failed (attempt $attempt of 3); trying again in 15 s"; sleep 15; }
  done
  if [ $installed -eq 0 ]; then
    cat "$log" >&2
    say "apt-get failed (above); install by hand: apt-get install ${missing[*]}"
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
fi

check_cuda
