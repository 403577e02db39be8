#!/usr/bin/env bash
# Bad command lines, data and weight files: a clear message naming the flag or file, a
# non-zero exit, never a crash.
. "$(dirname "$0")/lib.sh"
run="$RDDP_BIN"
# 16x16 crops: one of these runs trains a step and several build the model, which under the
# sanitizers (test_sanitizers.sh) took over a minute a step at 32x32.
synthetic=(--dataset synthetic --device cpu --limit-train 16 --limit-val 8 --batch-size 8 --image-size 16)

expect 0 "usage: resnet_ddp --data DIR" -- "$run" --help
# The libraries as loaded; this machine may have no NVIDIA driver, which the line says. One run:
# each start costs most of a second under the sanitizers.
expect 0 "^resnet_ddp [0-9]+\.[0-9]+\.[0-9]+$" -- "$run" --version
for library in "CUDA runtime +[0-9]+\.[0-9]" "CUDA driver +([0-9]+\.[0-9]|none \(no NVIDIA driver)" \
               "cuDNN +[0-9]+\.[0-9]+\.[0-9]" "cuBLAS +[0-9]+\.[0-9]+\.[0-9]" \
               "NCCL +2\.[0-9]+\.[0-9]" "MPI +[A-Za-z]" "JPEG +libjpeg"; do
  check "--version names /^  $library/" grep -qE -- "^  $library" "$work/out"
done
expect 2 "--data DIR is required" -- "$run"
expect 2 "unknown option '--learning-rate'" -- "$run" --data x --learning-rate 1
expect 2 "--batch-size: 0 is outside the accepted range \[1, " -- "$run" --data x --batch-size 0
expect 2 "--lr: 'abc' is not a number" -- "$run" --data x --lr abc
expect 2 "--epochs: -3 is outside the accepted range" -- "$run" --data x --epochs -3
expect 2 "--grad-allreduce: 'fp16' is not one of: fp32, bf16" -- "$run" --data x --grad-allreduce fp16
expect 2 "--device: 'gpu' is not one of: auto, cpu, cuda" -- "$run" --data x --device gpu
expect 2 "--label-smoothing: 2 is outside the accepted range \[0, " -- "$run" --data x --label-smoothing 2
# A flag given where it does not apply: refused before any work, naming what it applies to.
expect 2 "--resume applies to --checkpoint-dir DIR, but this run has no --checkpoint-dir: drop --resume, or add --checkpoint-dir DIR" -- \
  "$run" --data x --resume
expect 2 "--momentum applies to --optimizer sgd, but this run uses --optimizer adamw \(the default\): drop --momentum, or add --optimizer sgd" -- \
  "$run" --data x --momentum 0.9
expect 2 "--beta1 applies to --optimizer adamw, but this run uses --optimizer sgd: drop --beta1, or choose --optimizer adamw" -- \
  "$run" --data x --optimizer sgd --beta1 0.8
expect 2 "--lr-gamma applies to --lr-schedule step, but this run uses --lr-schedule cosine: drop --lr-gamma, or add --lr-schedule step" -- \
  "$run" --data x --lr-schedule cosine --lr-gamma 0.5
expect 2 "--cuda-graphs applies to GPU training, but this run trains on the CPU \(--device cpu\): drop --cuda-graphs" -- \
  "$run" --data x --device cpu --cuda-graphs off
expect 2 "--init-reset-classifier applies to --init FILE, but this run has no --init" -- \
  "$run" --data x --init-reset-classifier
expect 2 "--lr applies to training, but --eval trains none: drop --lr, or drop --eval" -- \
  "$run" --data x --init w.rddp --eval --lr 0.1

expect 1 "/nonexistent/data" -- "$run" --data /nonexistent/data --device cpu
mkdir -p "$work/empty"
expect 1 "$work/empty" -- "$run" --data "$work/empty" --device cpu

# Weights that are not ours, damaged, or for another model.
echo "not a weights file" >"$work/junk.rddp"
expect 1 "junk.rddp" -- "$run" "${synthetic[@]}" --init "$work/junk.rddp"
printf 'PK\003\004rest-of-a-zip' >"$work/model.pth"
expect 1 "torchvision_to_resnet_ddp.py" -- "$run" "${synthetic[@]}" --init "$work/model.pth"
expect 0 "weights written" -- "$run" "${synthetic[@]}" --max-steps 1 --save-weights "$work/ten.rddp"
# The loader keeps freed image memory for reuse, unless the user tuned glibc's malloc, or
# AddressSanitizer's allocator stands in for glibc's (scripts/test_sanitizers.sh); --verbose's
# settings table says which. Evaluating the weights above starts the same loader without a
# training step, which takes ten seconds under the sanitizers.
kept="freed image buffers kept for reuse"
[ -n "${ASAN_OPTIONS:-}" ] && kept="mallopt refused the thresholds"
evaluate=(--dataset synthetic --device cpu --limit-val 2 --batch-size 8 --image-size 16 --init "$work/ten.rddp"
          --eval --verbose)
expect 0 "loader .*$kept" -- "$run" "${evaluate[@]}"
expect 0 "loader .*malloc as GLIBC_TUNABLES sets it" -- \
  env GLIBC_TUNABLES=glibc.malloc.trim_threshold=1048576 "$run" "${evaluate[@]}"
expect 1 "--stem imagenet disagrees with --init '.*ten.rddp', which holds a model with the cifar stem: pass --stem cifar" -- \
  "$run" "${synthetic[@]}" --init "$work/ten.rddp" --stem imagenet
head -c 20000 "$work/ten.rddp" >"$work/cut.rddp"
expect 1 "cut.rddp.*(truncated|ends)" -- "$run" "${synthetic[@]}" --init "$work/cut.rddp"

# A checkpoint directory holding only damaged checkpoints.
mkdir -p "$work/ck"
cp "$work/cut.rddp" "$work/ck/checkpoint-0000000004.rddp"
expect 1 "passed over .*checkpoint-0000000004.rddp.*truncated" -- \
  "$run" "${synthetic[@]}" --checkpoint-dir "$work/ck" --resume
finish
