#!/usr/bin/env bash
# Runs everything that needs a GPU, on a machine that has one and a built tree (cmake --build
# build), and writes a report to bench/results/gpu-check-<gpu>-<date>.md with every output:
#   1. the gpu tests (every CUDA layer and kernel against its CPU twin; the whole net's loss,
#      gradients and AdamW step against the CPU executor);
#   2. the NCCL communicator tests, alone and under mpirun -np 1 when mpirun is there;
#   3. Fashion-MNIST for 5 epochs on the GPU (accuracy after each epoch), and the same recipe
#      in PyTorch on the same GPU (bench/pytorch_recipe.py): the accuracies must agree within
#      half a point;
#   4. resume on the GPU with deterministic algorithms: k steps + resume + k steps must give
#      bit-identical weights to 2k steps;
#   5. a plain single-process run and mpirun -np 1, both through the NCCL path;
#   6. the throughput benchmark against PyTorch (bench/run_throughput.sh), when present.
# Exits non-zero when any step fails. Environment: RDDP_BUILD_DIR (build), RDDP_FASHION_MNIST
# (/usr/share/datasets/fashion-mnist), RDDP_REPORT_DIR (bench/results), RDDP_EPOCHS (5).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RDDP_BUILD_DIR:-$root/build}
data=${RDDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
epochs=${RDDP_EPOCHS:-5}
report_dir=${RDDP_REPORT_DIR:-$root/bench/results}
bin=$build/resnet_ddp

[ -x "$bin" ] || { echo "gpu_check.sh: no $bin: build first (cmake --build build)" >&2; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$gpu" ] || { echo "gpu_check.sh: nvidia-smi sees no GPU" >&2; exit 1; }
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
slug=$(echo "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//')
mkdir -p "$report_dir"
report=$report_dir/gpu-check-$slug-$(date +%Y-%m-%d).md
logs=$(mktemp -d)
failures=0
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

{
  echo "# GPU check: $gpu"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- driver $driver; $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'nvcc not found')"
  echo "- host $(hostname), $(nproc) CPUs"
} >"$report"

# step NAME COMMAND...: runs it, appends its status, time and output tail to the report.
step() {
  local name=$1
  shift
  local log=$logs/$(printf '%s' "$name" | tr -cs 'A-Za-z0-9' '_').log start status
  echo "== $name"
  start=$(date +%s)
  "$@" >"$log" 2>&1
  status=$?
  local verdict=PASS
  [ $status -eq 0 ] || { verdict="FAIL (exit $status)"; failures=$((failures + 1)); }
  [ $status -eq 77 ] && { verdict=SKIPPED; failures=$((failures - 1)); }
  echo "   $verdict in $(($(date +%s) - start)) s"
  {
    echo
    echo "## $name: $verdict ($(($(date +%s) - start)) s)"
    echo
    echo '```'
    echo "\$ $*"
    tail -n 60 "$log"
    echo '```'
  } >>"$report"
  return $status
}

step "gpu tests" "$build/tests/gpu_tests"
step "NCCL communicator, one process" "$build/tests/mpi/nccl_comm_test"
if command -v mpirun >/dev/null; then
  step "NCCL communicator, mpirun -np 1" mpirun -np 1 "$build/tests/mpi/nccl_comm_test"
fi

fashion=(--data "$data" --device cuda --epochs "$epochs" --batch-size 128 --print-every 100)
if [ -f "$data/train-images-idx3-ubyte.gz" ] || [ -f "$data/train-images-idx3-ubyte" ]; then
  step "Fashion-MNIST, $epochs epochs on the GPU" "$bin" "${fashion[@]}" --log-json "$logs/fashion.jsonl"
  ours=$(grep -ho 'final validation accuracy [0-9.]*' "$logs"/Fashion_MNIST_*GPU*.log | grep -o '[0-9.]*$')
  python=$("$root/scripts/find_python.sh" torch torchvision numpy 2>/dev/null)
  if [ -n "$python" ]; then
    step "the same recipe in PyTorch" "$python" "$root/bench/pytorch_recipe.py" --data "$data" --epochs "$epochs" --device cuda
    theirs=$(grep -ho 'final validation accuracy [0-9.]*' "$logs"/the_same_recipe_in_PyTorch.log | grep -o '[0-9.]*$')
    if [ -n "$ours" ] && [ -n "$theirs" ]; then
      within=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; print (d <= 0.5) ? "yes" : "no" }')
      [ "$within" = yes ] || failures=$((failures + 1))
      printf '\n## Fashion-MNIST after %s epochs: resnet_ddp %s%%, PyTorch %s%%: within half a point: %s\n' \
        "$epochs" "$ours" "$theirs" "$within" >>"$report"
    fi
  fi
else
  echo "no Fashion-MNIST in $data: set RDDP_FASHION_MNIST" | tee -a "$report"
  failures=$((failures + 1))
fi

resume=(--dataset synthetic --device cuda --deterministic --batch-size 64 --limit-train 1024 --limit-val 256
        --epochs 2 --print-every 8)
step "resume, straight run" "$bin" "${resume[@]}" --max-steps 24 --save-weights "$logs/straight.rddp"
step "resume, first half" "$bin" "${resume[@]}" --max-steps 12 --checkpoint-dir "$logs/ck"
step "resume, second half" "$bin" "${resume[@]}" --max-steps 24 --checkpoint-dir "$logs/ck" --resume \
  --save-weights "$logs/resumed.rddp"
step "resumed weights bit-identical to the straight run" cmp "$logs/straight.rddp" "$logs/resumed.rddp"

nccl_run=(--dataset synthetic --device cuda --batch-size 128 --limit-train 2048 --limit-val 256 --epochs 1 --print-every 4)
step "one process through NCCL" "$bin" "${nccl_run[@]}"
if command -v mpirun >/dev/null; then
  step "mpirun -np 1 through NCCL" mpirun -np 1 "$bin" "${nccl_run[@]}"
fi

if [ -x "$root/bench/run_throughput.sh" ]; then
  step "throughput against PyTorch" "$root/bench/run_throughput.sh"
fi

echo >>"$report"
echo "$failures step(s) failed" | tee -a "$report"
echo "report: $report"
[ $failures -eq 0 ]
