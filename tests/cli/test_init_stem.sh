#!/usr/bin/env bash
# Weights saved by a run with the ImageNet stem on small images start the next run without
# naming the stem again: --stem auto takes the stem the --init file holds. A --stem the file
# does not hold is refused before any model is built, naming the file and the fix.
. "$(dirname "$0")/lib.sh"
# 16x16 images, on which auto alone would choose the CIFAR stem.
synthetic=(--dataset synthetic --device cpu --limit-val 4 --batch-size 4 --image-size 16)
train=(--limit-train 8)
weights=$work/imagenet-stem.rddp

expect 0 "weights written" -- \
  "$RDDP_BIN" "${synthetic[@]}" "${train[@]}" --stem imagenet --max-steps 1 --save-weights "$weights"
expect 0 "model +ResNet-18, stem=imagenet " -- \
  "$RDDP_BIN" "${synthetic[@]}" --init "$weights" --eval
check "the evaluation loaded the file's weights" \
  grep -q "init: loaded .* from '$weights'" "$work/out"
expect 0 "model +ResNet-18, stem=imagenet " -- \
  "$RDDP_BIN" "${synthetic[@]}" "${train[@]}" --init "$weights" --stem auto --max-steps 1
expect 0 "model +ResNet-18, stem=imagenet " -- \
  "$RDDP_BIN" "${synthetic[@]}" --init "$weights" --stem imagenet --eval
refusal="--stem cifar disagrees with --init '$weights', which holds a model with the imagenet"
refusal+=" stem: pass --stem imagenet, or leave --stem out"
expect 1 "$refusal" -- \
  "$RDDP_BIN" "${synthetic[@]}" --init "$weights" --stem cifar --eval
check "the refusal comes before the settings table" bash -c '! grep -q "^resnet_ddp$" "$1"' _ "$work/out"
finish
