#!/usr/bin/env bash
# The CUDA architectures scripts/configure_build.sh gives the build folder that
# scripts/quickstart.sh and scripts/test.sh share: RDDP_CUDA_ARCHS when set, else the folder's
# own when they cover this machine's GPUs, else those GPUs' (a stand-in nvidia-smi), else 90.
# Then both scripts configure through it, so neither can choose another list.
source "$(dirname "$0")/lib.sh"
: "${RDDP_SOURCE_DIR:?set RDDP_SOURCE_DIR to the source tree}"
script=$RDDP_SOURCE_DIR/scripts/configure_build.sh
mkdir -p "$work/bin" "$work/build"

# gpus CAPABILITY...: nvidia-smi lists one GPU of each compute capability; none: no GPU answers.
gpus() {
  if [ $# -eq 0 ]; then
    printf '#!/bin/sh\necho "NVIDIA-SMI has failed: no NVIDIA driver is running" >&2\nexit 9\n'
  else
    printf '#!/bin/sh\n[ "$1" = --query-gpu=compute_cap ] || exit 2\n'
    printf 'echo %s\n' "$@"
  fi >"$work/bin/nvidia-smi"
  chmod +x "$work/bin/nvidia-smi"
}
# cached ARCHS: the build folder was configured for ARCHS; none: it was never configured.
cached() {
  rm -f "$work/build/CMakeCache.txt"
  [ $# -eq 0 ] || echo "CMAKE_CUDA_ARCHITECTURES:STRING=$1" >"$work/build/CMakeCache.txt"
}
archs() { env -u RDDP_CUDA_ARCHS PATH="$work/bin:$PATH" "$script" --archs "$work/build"; }

gpus; cached
expect 0 "^90$" -- archs
gpus 8.0; cached
expect 0 "^80$" -- archs
gpus 9.0 8.0 9.0; cached
expect 0 "^80;90$" -- archs
gpus 12.0; cached
expect 0 "^120$" -- archs
# A folder keeps its list while it covers the GPUs, and takes theirs when it does not.
gpus; cached "80;90"
expect 0 "^80;90$" -- archs
gpus 8.0; cached "80;90"
expect 0 "^80;90$" -- archs
gpus 8.0; cached 90
expect 0 "^80$" -- archs
gpus 8.0; cached
expect 0 "^70$" -- env RDDP_CUDA_ARCHS=70 PATH="$work/bin:$PATH" "$script" --archs "$work/build"
expect 2 "usage: .*BUILD_DIR" -- "$script" --archs

for user in quickstart.sh test.sh; do
  check "$user configures through configure_build.sh and no cmake of its own" \
    bash -c "grep -q 'scripts/configure_build.sh\" \"\$build\"' '$RDDP_SOURCE_DIR/scripts/$user' &&
             ! grep -q 'cmake -S' '$RDDP_SOURCE_DIR/scripts/$user'"
done
finish
