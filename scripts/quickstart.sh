#!/usr/bin/env bash
# The main job on a built-in default that needs no download: sets up, builds, and trains
# ResNet-18 on Fashion-MNIST from Debian's dataset-fashion-mnist package; on the GPU when one
# answers (5 epochs), else a CPU run of about five minutes that reaches 88 % (below). Ends by
# printing the validation accuracy and where the log, metrics and plot are. It configures the
# build as scripts/test.sh does (scripts/configure_build.sh), so neither rebuilds the other's.
#   scripts/quickstart.sh [extra resnet_ddp flags, e.g. --epochs 2]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RDDP_BUILD_DIR:-$root/build}
run_dir=${RDDP_RUN_DIR:-$root/runs/quickstart}
data=/usr/share/datasets/fashion-mnist

"$root/scripts/setup.sh"
[ -f "$data/train-images-idx3-ubyte.gz" ] ||
  { echo "quickstart.sh: $data is missing: apt-get install dataset-fashion-mnist" >&2; exit 1; }
mkdir -p "$run_dir"
"$root/scripts/configure_build.sh" "$build"
cmake --build "$build" --target resnet_ddp -j "$(nproc)"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  recipe=(--device cuda --epochs 5 --batch-size 128)
  what="5 epochs on the GPU"
else
  # ResNet-18's ImageNet stem (7x7/2 convolution and max-pool) shrinks 28x28 images to 7x7
  # before the first block: a step costs about a sixteenth of the CIFAR stem's. 2 epochs of 20480
  # images with a cosine schedule, unaugmented, reach 87.9 % on all 10000 test images; on two
  # cores shared with other work (130 to 150 images/s) training and evaluation take 5.6 minutes.
  recipe=(--device cpu --stem imagenet --epochs 2 --batch-size 128 --limit-train 20480
          --augment none --lr-schedule cosine --warmup-epochs 0.2)
  what="a CPU run (no GPU answers): 2 epochs of 20480 training images, ImageNet stem"
  # OpenMP threads that spin while they wait lose badly on a machine doing other work too.
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
fi
echo "quickstart: ResNet-18 on Fashion-MNIST, $what"
rm -f "$run_dir/metrics.jsonl"
started=$SECONDS
"$build/resnet_ddp" --data "$data" "${recipe[@]}" --print-every 16 \
  --log-json "$run_dir/metrics.jsonl" --save-weights "$run_dir/weights.rddp" "$@" 2>&1 |
  tee "$run_dir/train.log"
took=$((SECONDS - started))

plot="(no plot: no Python with matplotlib; apt-get install python3-matplotlib)"
if python=$("$root/scripts/find_python.sh" matplotlib 2>/dev/null); then
  "$python" "$root/scripts/plot_metrics.py" "$run_dir/metrics.jsonl" -o "$run_dir/metrics.png" \
    --labels quickstart >/dev/null
  plot="$run_dir/metrics.png"
fi
echo
echo "quickstart done ($what) in $took s"
grep '^final validation accuracy' "$run_dir/train.log" || true
echo "log      $run_dir/train.log"
echo "metrics  $run_dir/metrics.jsonl"
echo "plot     $plot"
echo "weights  $run_dir/weights.rddp (to PyTorch: scripts/resnet_ddp_to_torchvision.py)"
