#!/usr/bin/env bash
# JPEG decoding per core, resnet_ddp (libjpeg-turbo) against Pillow (torchvision), on the same
# ImageNet-like files, and reading the same images from a resnet_ddp_pack pack instead:
#   bench/run_decode_bench.sh [BUILD_DIR] [SECONDS] [RUNS]
# The JPEGs are made once, under BUILD_DIR/bench_jpegs. The two run in turn RUNS times (3)
# and the table keeps each one's best, which on a shared machine is the least disturbed.
set -euo pipefail
# Both processes keep freed memory instead of handing it back to the kernel after every
# image. With glibc's defaults each decoded image may cost fresh pages, which on some kernels
# is a quarter of the decode time, and how often depends on what the process did before
# (importing torch changes it), so the comparison would measure the allocator's history.
# resnet_ddp's loader (and decode_bench on its own) sets the same thresholds itself
# (src/data/malloc_tuning.cpp); Pillow's process gets them from here.
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
seconds=${2:-3}
runs=${3:-3}
python=$("$here/../scripts/find_python.sh" PIL numpy)
jpegs=$build/bench_jpegs
if [ ! -d "$jpegs" ]; then
  "$python" "$here/make_jpegs.py" --out "$jpegs" --count 200
fi
if [ ! -x "$build/bench/decode_bench" ]; then
  echo "run_decode_bench.sh: $build/bench/decode_bench is missing: build the project first" >&2
  exit 1
fi
ours="" pillow=""
for ((run = 0; run < runs; ++run)); do
  ours+=$("$build/bench/decode_bench" "$jpegs" "$seconds")$'\n'
  pillow+=$("$python" "$here/pillow_decode.py" "$jpegs" "$seconds")$'\n'
done
echo "$ours" | head -8
echo "$pillow" | head -3
# The best images/s of the lines that contain $2.
best() {
  echo "$1" | awk -v what="$2" 'index($0, what) {
    for (i = 1; i < NF; ++i) if ($(i + 1) == "images/s" && $i > max) max = $i
  } END { print max }'
}
echo
printf "%-40s %10s %10s\n" "images/s on one core, best of $runs" "resnet_ddp" "Pillow"
for row in "decode   " "decode + RandomResizedCrop(224) + flip"; do
  printf "%-40s %10s %10s\n" "$row" "$(best "$ours" "$row")" "$(best "$pillow" "$row")"
done
# torchvision decodes the whole image: Pillow's figure is the row above.
row="the crop decoded alone, as the loader"
printf "%-40s %10s %10s\n" "$row" "$(best "$ours" "$row")" "-"
# Pillow has no packed rows: torchvision reads image files.
for row in "packed read" "packed + RandomResizedCrop(224) + flip" "the same + normalise to float NCHW"; do
  printf "%-40s %10s %10s\n" "$row" "$(best "$ours" "$row")" "-"
done
