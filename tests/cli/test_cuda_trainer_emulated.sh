#!/usr/bin/env bash
# resnet_ddp --device cuda as a user runs it, on the CPU: the program built against the CUDA
# emulator (tests/emu/README.md), one rank. With --cuda-graphs on the training step is captured,
# replayed, and gives the eager run's weights bit for bit while the learning rate changes every
# step (the batches travel as uint8 pixels, normalised on the device), with the convolutions
# through cuDNN's graph API as well; bf16 and fp16 NHWC runs with our fused BatchNorm stop, resume from their checkpoints and
# end with the weights of runs straight through.
. "$(dirname "$0")/lib.sh"
if [ ! -x "${RDDP_EMULATED_BIN:-}" ]; then
  echo "SKIPPED: the emulated resnet_ddp was not built (its build needs mpiexec; the sanitizer build leaves it out)"
  exit 77
fi
export RDDP_EMULATED_GPUS=1
# 44 images in batches of 8: five full steps and a last one of 4, which runs eagerly. 16x16 crops
# of the 32x32 images, since the emulated convolutions cost most.
run=("$RDDP_EMULATED_BIN" --dataset synthetic --device cuda --batch-size 8 --limit-train 44 --limit-val 8
     --image-size 16 --epochs 1 --print-every 1 --lr-schedule cosine --conv-algorithms heuristic)

# A GPU takes the loader's uint8 pixels and normalises them itself.
expect 0 "normalisation +none \(on the GPU, from the batch's uint8 pixels\)" -- "${run[@]}" --max-steps 1
# MFU only against the peak of a GPU known by name, compute capability and SM count: the
# emulated device is none of them, so the settings say so and no line shows a figure.
check "the settings table says why there is no MFU, and the model's FLOPs per image" \
  grep -qE "^  MFU +unknown: emulated .* is not among the GPUs of include/resnet_ddp/gpu_peaks.h; 0.83 GFLOP per training image" \
  "$work/out"
check "no progress or epoch line shows an MFU figure" bash -c '! grep -q "MFU [0-9]" "$1"' _ "$work/out"
# The defaults are not our fastest step: the settings name every flag of it that the run leaves
# out (the bf16 and fp16 runs below leave out one of three), and none once it has them all.
check "the settings name the flags of the fastest step" grep -qE \
  "^  speed +faster with --batchnorm fused --memory-format nhwc --cuda-graphs on \(docs/performance.md\)$" \
  "$work/out"
expect 0 "cuda graphs +on: " -- "${run[@]}" --max-steps 1 --batchnorm fused --memory-format nhwc --cuda-graphs on
check "no speed line in the settings of a run with the fastest flags" \
  bash -c '! grep -q "^  speed " "$1"' _ "$work/out"
expect 0 "cuda graphs: 2 of 6 training steps replayed from the graph \([0-9]+ nodes\)" -- \
  "${run[@]}" --cuda-graphs on --save-weights "$work/graphs.rddp"
expect 0 "weights written" -- "${run[@]}" --cuda-graphs off --save-weights "$work/eager.rddp"
check "--cuda-graphs on gives the eager run's weights bit for bit" cmp "$work/graphs.rddp" "$work/eager.rddp"
# cuDNN's graph API for the convolutions, replayed too, and the last batch of 4 with plans made
# for it when it comes: on the emulator, whose convolutions all add in one order, the legacy
# API's weights bit for bit.
expect 0 "heuristic choice among the graph API's plans" -- \
  "${run[@]}" --conv-api graph --cuda-graphs on --save-weights "$work/conv-graph.rddp"
check "--conv-api graph gives the legacy API's weights bit for bit (emulated)" \
  cmp "$work/graphs.rddp" "$work/conv-graph.rddp"
check "--conv-api graph ends saying every convolution ran on a graph-API plan" \
  grep -qE "convolutions: [1-9][0-9]* on plans of cuDNN's graph API, 0 on legacy algorithms$" "$work/out"

# fp16 also carries its dynamic loss scale across the checkpoint.
for precision in bf16 fp16; do
  sixteen=("${run[@]}" --precision "$precision" --memory-format nhwc --batchnorm fused)
  expect 0 "epoch 1/1: train loss [0-9.]+ " -- "${sixteen[@]}" --save-weights "$work/$precision-straight.rddp"
  check "$precision NHWC fused BatchNorm: the settings name only --cuda-graphs on" \
    grep -qE "^  speed +faster with --cuda-graphs on \(" "$work/out"
  expect 0 "checkpoint .*checkpoint-0000000003.rddp" -- \
    "${sixteen[@]}" --max-steps 3 --checkpoint-dir "$work/ck-$precision"
  expect 0 "start .*checkpoint-0000000003.rddp" -- \
    "${sixteen[@]}" --checkpoint-dir "$work/ck-$precision" --resume --save-weights "$work/$precision-resumed.rddp"
  check "$precision NHWC fused BatchNorm: resumed weights are bit-identical to straight-through ones" \
    cmp "$work/$precision-straight.rddp" "$work/$precision-resumed.rddp"
done
differ() { ! cmp -s "$1" "$2"; }
check "bf16 and fp16 train to different weights" differ "$work/bf16-straight.rddp" "$work/fp16-straight.rddp"
finish
