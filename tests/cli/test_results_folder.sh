#!/usr/bin/env bash
# Each measuring run files its results in a folder of its own, bench/results/<date>-<gpu>-<commit>
# (bench/results/README.md): scripts/results_folder.sh names it, and bench/run_throughput.sh and
# scripts/gpu_check.sh write there unless given a folder. Dry runs show where, writing nothing.
source "$(dirname "$0")/lib.sh"
folder=$RDDP_SOURCE_DIR/scripts/results_folder.sh
day='[0-9]{4}-[0-9]{2}-[0-9]{2}'

expect 0 "^$day-H100-fa60b96$" -- "$folder" "NVIDIA H100 80GB HBM3" fa60b96e0123456789abcdef
expect 0 "^$day-A100-abc1234-dirty$" -- \
  "$folder" "NVIDIA A100-SXM4-80GB" "abc1234 (with uncommitted changes)"
expect 0 "^$day-RTX-4090$" -- "$folder" "NVIDIA GeForce RTX 4090" unknown
expect 0 "^$day-V100$" -- "$folder" "Tesla V100-SXM2-32GB"
expect 0 "^$day-cpu-b32c5fc$" -- "$folder" cpu b32c5fc
expect 0 "^$day-H200$" -- "$folder" "NVIDIA H200" "unknown (with uncommitted changes)"
expect 2 "usage: results_folder.sh GPU-NAME" -- "$folder" ""

# The scripts' default: this run's folder under the source tree's bench/results.
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "Stand-in GPU, 999.99, 9.0"\n' >"$work/bin/nvidia-smi"
chmod +x "$work/bin/nvidia-smi"
PATH=$work/bin:$PATH RDDP_COMMIT=0123abcd99 expect 0 \
  "^== results go to $RDDP_SOURCE_DIR/bench/results/$day-Stand-in-GPU-0123abc$" -- \
  "$RDDP_SOURCE_DIR/bench/run_throughput.sh" --dry-run --prebuilt --build-dir "$work/none" \
  --impls resnet_ddp --sizes 32 --precisions bf16
PATH=$work/bin:$PATH RDDP_COMMIT=0123abcd99 expect 0 "^== results go to $work/mine$" -- \
  "$RDDP_SOURCE_DIR/bench/run_throughput.sh" --dry-run --prebuilt --build-dir "$work/none" \
  --impls resnet_ddp --sizes 32 --precisions bf16 --results-dir "$work/mine"
RDDP_COMMIT=0123abcd99 expect 0 \
  "the report would be $RDDP_SOURCE_DIR/bench/results/$day-[A-Za-z-]+-0123abc/gpu-check-" -- \
  "$RDDP_SOURCE_DIR/scripts/gpu_check.sh" --dry-run --part tests
RDDP_COMMIT=0123abcd99 RDDP_REPORT_DIR=$work/reports expect 0 \
  "the report would be $work/reports/gpu-check-" -- \
  "$RDDP_SOURCE_DIR/scripts/gpu_check.sh" --dry-run --part tests
check "the dry runs wrote no folder" \
  bash -c '! ls -d "$1"/bench/results/*-0123abc "$2/mine" "$2/reports" 2>/dev/null' _ \
  "$RDDP_SOURCE_DIR" "$work"
finish
