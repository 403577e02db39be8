#!/usr/bin/env bash
# What a profiler sees of a run: the NVTX ranges resnet_ddp opens (domain resnet_ddp), recorded
# by tests/support/nvtx_recorder.cpp in place of Nsight Systems, and --profile-steps' collection
# window. One CPU rank with a checkpoint; the CUDA program on the emulator with a graph captured
# and replayed inside the window (its cudaProfilerStart/Stop calls printed by the emulator); the
# flag's refusals. With MPIEXEC given, two CPU ranks instead: each rank's ranges, with the
# gradient buckets, the statistics broadcast and the replica check.
#   test_profile_ranges.sh [MPIEXEC [FLAGS...]]
. "$(dirname "$0")/lib.sh"
: "${RDDP_NVTX_RECORDER:?set RDDP_NVTX_RECORDER to the NVTX recorder library}"
here=$(dirname "$0")
python=$(command -v python3) || { echo "SKIPPED: no python3 to read the recorded ranges"; exit 77; }
export NVTX_INJECTION64_PATH=$RDDP_NVTX_RECORDER RDDP_NVTX_LOG="$work/ranges.{pid}.log"

# outline_is EXPECTED_FILE LOG: the log's outline is the expected one, line for line.
outline_is() {
  "$python" "$here/nvtx_outline.py" "$2" >"$work/outline" 2>&1 || { cp "$work/outline" "$work/out"; return 1; }
  diff -u "$1" "$work/outline" >"$work/out"
}

# A train step as the CPU engine runs it with the gradient reducer of 3 buckets (ResNet-18,
# 25 MiB buckets), at two spaces of indent.
cpu_step() {
  printf '  data wait\n  train step %s\n    forward\n    loss\n    backward\n' "$1"
  printf '      allreduce bucket %s\n' 0 1 2
  printf '    wait for allreduce\n    optimizer\n'
}

# 24 images in batches of 4: six steps on one rank, three on each of two; --max-steps 3 stops
# either after its third. 8x8 crops: the ranges do not depend on the size, and the sanitizer
# build trains slowly.
train=("$RDDP_BIN" --dataset synthetic --batch-size 4 --limit-train 24 --limit-val 8 --image-size 8
       --epochs 1 --max-steps 3 --print-every 10)

if [ $# -gt 0 ]; then
  # Two ranks: the statistics broadcast opens each step and evaluation, the replica check runs
  # inside the epoch-end checkpoint, and both ranks see the same ranges.
  expect 0 "profiler collects global steps 2 to 2" -- "$@" -n 2 "${train[@]}" --device cpu --profile-steps 2
  { echo "epoch 1"
    for step in 1 2 3; do
      [ "$step" = 2 ] && echo "  [profiled steps 2-2"
      cpu_step "$step" | sed '2a\    broadcast batchnorm statistics'
      [ "$step" = 2 ] && echo "  ]profiled steps 2-2"
    done
    printf '  read metrics\n  epoch metrics\n  evaluate\n    broadcast batchnorm statistics\n  checkpoint\n    replica check\n'
  } >"$work/expected"
  logs=("$work"/ranges.*.log)
  check "one range log per rank" test "${#logs[@]}" = 2
  for log in "${logs[@]}"; do
    check "$(basename "$log"): the ranges of two-rank training" outline_is "$work/expected" "$log"
  done
  finish
  exit 0
fi

# One CPU rank; steps 2 and 3 profiled; the run checkpoints where --max-steps stops it.
expect 0 "profiling +NVTX ranges in domain resnet_ddp; profiler collects global steps 2 to 3 \(the \"profiled steps\" range\)" -- \
  "${train[@]}" --device cpu --profile-steps 2-3 --checkpoint-dir "$work/ck"
{ echo "epoch 1"
  cpu_step 1
  echo "  [profiled steps 2-3"
  cpu_step 2
  cpu_step 3
  printf '  ]profiled steps 2-3\n  read metrics\n  epoch metrics\n  evaluate\n  checkpoint\n'
} >"$work/expected"
check "CPU: epoch, data waits, steps with forward, loss, backward, buckets, optimizer; the window holds steps 2 and 3" \
  outline_is "$work/expected" "$work"/ranges.*.log
rm -f "$work"/ranges.*.log

if [ -x "${RDDP_EMULATED_BIN:-}" ]; then
  # The CUDA program: step 4 is captured as a graph (its ranges open while capturing), step 5
  # replays it. The profiler is switched on before step 4 and off after step 5, once each.
  export RDDP_EMULATED_GPUS=1 RDDP_EMU_LOG_PROFILER=1
  expect 0 "cuda graphs: 2 of 5 training steps replayed" -- "$RDDP_EMULATED_BIN" --dataset synthetic --device cuda \
    --batch-size 8 --limit-train 44 --limit-val 8 --image-size 8 --epochs 1 --max-steps 5 --print-every 10 \
    --conv-algorithms heuristic --cuda-graphs on --profile-steps 4-5
  check "cudaProfilerStart, then cudaProfilerStop, once each" \
    test "$(grep -o 'emulated CUDA: cudaProfiler[A-Za-z]*' "$work/out" | tr '\n' ' ')" = \
         "emulated CUDA: cudaProfilerStart emulated CUDA: cudaProfilerStop "
  cuda_step() {
    printf '  data wait\n  train step %s\n    upload batch\n' "$1"
    local indent="    "
    [ "$2" = capture ] && { echo "    graph capture"; indent="      "; }
    if [ "$2" = replay ]; then echo "    graph replay"; else
      printf "${indent}%s\n" forward loss backward optimizer; fi
    echo "    wait for batch copy"
  }
  { echo "epoch 1"
    cuda_step 1 eager; cuda_step 2 eager; cuda_step 3 eager
    echo "  [profiled steps 4-5"
    cuda_step 4 capture; cuda_step 5 replay
    printf '  ]profiled steps 4-5\n  read metrics\n  epoch metrics\n  evaluate\n'
  } >"$work/expected"
  check "CUDA (emulated): uploads, the graph's capture and replay, the window around steps 4 and 5" \
    outline_is "$work/expected" "$work"/ranges.*.log
  unset RDDP_EMU_LOG_PROFILER
else
  echo "SKIPPED (part): the emulated resnet_ddp was not built; the CUDA program's ranges are not checked"
fi

# The flag's refusals, and a window the run never reaches.
expect 2 "--profile-steps: '5-2' ends before it starts; give FIRST-LAST" -- "${train[@]}" --profile-steps 5-2
expect 2 "--profile-steps: 'x' is not a step range; give FIRST-LAST \(global steps from 1\), e.g. 100-120" -- \
  "${train[@]}" --profile-steps x
expect 2 "--profile-steps: 0 is outside the accepted range \[1, " -- "${train[@]}" --profile-steps 0-3
expect 2 "--profile-steps applies to training, but --eval trains none: drop --profile-steps, or drop --eval" -- \
  "$RDDP_BIN" --dataset synthetic --eval --init "$work/none.rddp" --profile-steps 2
expect 0 "--profile-steps 7-9: this run trained global steps 1 to 1, none of them in the window, so the profiler collected nothing" -- \
  "${train[@]}" --device cpu --profile-steps 7-9 --max-steps 1
finish
