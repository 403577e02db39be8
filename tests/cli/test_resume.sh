#!/usr/bin/env bash
# Resume: k steps, stop, resume, k more gives bit-identical weights to 2k steps in one go;
# a damaged newest checkpoint is passed over, saying so; an empty directory starts afresh.
. "$(dirname "$0")/lib.sh"
# 16x16 crops of the synthetic 32x32 images: what resuming must keep does not depend on the size,
# and the CPU trains them three times as fast.
run=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 64 --limit-val 16 --image-size 16
     --epochs 2 --lr-schedule cosine --warmup-epochs 0.5 --print-every 4)

expect 0 "weights written" -- "${run[@]}" --max-steps 12 --save-weights "$work/straight.rddp" \
  --log-json "$work/straight.jsonl"
# Ten classes: top-5 is printed beside top-1, and logged for both splits.
check "the epoch line gives the validation top-1 and top-5" \
  grep -qE "val loss [0-9.]+ acc [0-9.]+% \(top-5 [0-9.]+%\)" "$work/out"
check "the last line too" grep -qE "^final validation accuracy [0-9.]+% \(top-5 [0-9.]+%\), loss" "$work/out"
check "the epoch record has both accuracies of both splits" \
  grep -qE '"train_accuracy":[^,]+,"train_top5_accuracy":[^,]+,.*"val_accuracy":[^,]+,"val_top5_accuracy"' \
  "$work/straight.jsonl"
expect 0 "resume: no checkpoint in .* yet" -- "${run[@]}" --max-steps 5 --checkpoint-dir "$work/ck" --resume
check "a checkpoint at step 5" test -f "$work/ck/checkpoint-0000000005.rddp"
expect 0 "start .*checkpoint-0000000005.rddp \(epoch 1, step 5, global step 5\)" -- \
  "${run[@]}" --max-steps 12 --checkpoint-dir "$work/ck" --resume --save-weights "$work/resumed.rddp"
check "resumed weights are bit-identical to straight-through ones" cmp "$work/straight.rddp" "$work/resumed.rddp"

# The same with SGD and Nesterov momentum, stopping at an epoch boundary.
sgd=(--optimizer sgd --nesterov --lr 0.05)
expect 0 "weights written" -- "${run[@]}" "${sgd[@]}" --max-steps 16 --save-weights "$work/sgd-straight.rddp"
expect 0 "checkpoint" -- "${run[@]}" "${sgd[@]}" --max-steps 8 --checkpoint-dir "$work/ck-sgd"
expect 0 "epoch 2, step 0" -- "${run[@]}" "${sgd[@]}" --max-steps 16 --checkpoint-dir "$work/ck-sgd" --resume \
  --save-weights "$work/sgd-resumed.rddp"
check "SGD: resumed weights are bit-identical" cmp "$work/sgd-straight.rddp" "$work/sgd-resumed.rddp"

# A checkpoint of another model or optimizer is refused, saying what differs and what to do.
expect 1 "checkpoint-0000000012.rddp belongs to another model \(stem cifar in the file, imagenet here\): resume with the data and --stem it was written with, or give this run another --checkpoint-dir" -- \
  "${run[@]}" --stem imagenet --checkpoint-dir "$work/ck" --resume

# Damage the newest checkpoint: --resume falls back to the one before and says so.
newest=$(ls "$work/ck"/checkpoint-*.rddp | sort | tail -1)
printf 'garbage' | dd of="$newest" bs=1 seek=4000 conv=notrunc status=none
expect 0 "passed over .*$(basename "$newest").*" -- "${run[@]}" --max-steps 12 --checkpoint-dir "$work/ck" --resume
# Resuming with another optimizer is refused, naming the one the checkpoint holds.
expect 1 "belongs to another optimizer: it was written with --optimizer adamw, this run uses --optimizer sgd: resume with the optimizer it was written with, or give this run another --checkpoint-dir" -- \
  "${run[@]}" --optimizer sgd --checkpoint-dir "$work/ck" --resume
finish
