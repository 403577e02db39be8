#!/usr/bin/env bash
# scripts/gpu_check.sh keeps several parts run in one command within the command's --budget, so
# that they fit a machine lent for a fixed time a command. No GPU is needed: a stand-in
# nvidia-smi names one, and a stand-in kernels_bench outlives any budget.
source "$(dirname "$0")/lib.sh"
script=$RDDP_SOURCE_DIR/scripts/gpu_check.sh

expect 2 "--budget needs whole seconds" -- "$script" --dry-run --budget soon
expect 2 "no part 'nosuch'" -- "$script" --dry-run --part nosuch
expect 0 "1340 s of the command's 560 s budget, which cuts the last ones short" -- \
  "$script" --dry-run --part tests,kernels,engine --budget 560
expect 0 "300 s of the command's 600 s budget$" -- "$script" --dry-run --part kernels --budget 600

mkdir -p "$work/bin" "$work/build/bench" "$work/reports"
printf '#!/bin/sh\necho "Stand-in GPU"\n' >"$work/bin/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' >"$work/build/resnet_ddp"
printf '#!/bin/sh\necho "kernels_bench started"\nexec sleep 600\n' >"$work/build/bench/kernels_bench"
chmod +x "$work/bin/nvidia-smi" "$work/build/resnet_ddp" "$work/build/bench/kernels_bench"

# The kernels step would have 300 s of its part's 520; the command's 12 s cut it to what is left.
start=$SECONDS
PATH=$work/bin:$PATH RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports RDDP_COMMIT=test \
  expect 1 "FAIL \(ran past its limit of 1[0-2] s\)" -- "$script" --part kernels --budget 12
check "the command ended within its budget and the kill grace ($((SECONDS - start)) s)" \
  [ $((SECONDS - start)) -le 30 ]
report=$(ls "$work"/reports/gpu-check-Stand-in-GPU-*.md)
check "the report names the command's budget and the cut step" \
  grep -q "kernel benchmarks: FAIL (ran past its limit of 1[0-2] s)" "$report"

# With the budget spent, a step is not started at all, and says whose budget it was.
PATH=$work/bin:$PATH RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports RDDP_COMMIT=test \
  expect 1 "NOT RUN: the part's budget of 520 s or the command's of 5 s is spent" -- \
  "$script" --part kernels --budget 5
finish
