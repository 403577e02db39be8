#!/usr/bin/env bash
# What each flag of resnet_ddp changes in what the program does, on the CPU: two runs that must
# differ (weights, learning rates, losses, record counts, files written, threads, gradient
# buckets), each difference made by the code that reads the flag. flag_effects.txt names this
# test for the flags it shows; cli.test_gpu_flag_effects shows the GPU flags.
. "$(dirname "$0")/lib.sh"
: "${RDDP_NVTX_RECORDER:?set RDDP_NVTX_RECORDER to the NVTX recorder library}"
: "${RDDP_PACK_BIN:?set RDDP_PACK_BIN to the resnet_ddp_pack program}"

# 8x8 crops of the synthetic images in batches of 4: 8 images are two steps, which is what a
# second AdamW or momentum step needs; a step's cost is the model's 11 M parameters, not the
# images.
cpu=(--device cpu --image-size 8 --batch-size 4 --limit-val 4)
synthetic=(--dataset synthetic "${cpu[@]}" --epochs 1 --limit-train 8 --print-every 1)

# train NAME FLAGS...: a run that must succeed; its weights NAME.rddp, its records NAME.jsonl,
# its output NAME.out.
train() {
  local name=$1
  shift
  "$RDDP_BIN" "$@" --save-weights "$work/$name.rddp" --log-json "$work/$name.jsonl" \
    >"$work/$name.out" 2>&1 && return
  cp "$work/$name.out" "$work/out"
  failed "run '$name' failed: $*"
}
differ() { ! cmp -s "$work/$1.rddp" "$work/$2.rddp"; }
same() { cmp -s "$work/$1.rddp" "$work/$2.rddp"; }
# The learning rates of NAME's step records, space-separated.
rates() { grep '"type":"step"' "$work/$1.jsonl" | sed 's/.*"lr":\([^,]*\),.*/\1/' | tr '\n' ' '; }
records() { grep -c "\"type\":\"$2\"" "$work/$1.jsonl"; }
# A value of NAME's start record.
started() { grep '"type":"start"' "$work/$1.jsonl" | sed "s/.*\"$2\":\([^,}]*\).*/\1/"; }
first_loss() { grep -m1 '"type":"step"' "$work/$1.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
val_loss() { grep -m1 "\"type\":\"$2\"" "$work/$1.jsonl" | sed 's/.*"val_loss":\([^,]*\),.*/\1/'; }

# Two references: one step, and the whole epoch of two. The one-step run also records its NVTX
# ranges, which hold each gradient bucket's allreduce.
NVTX_INJECTION64_PATH=$RDDP_NVTX_RECORDER RDDP_NVTX_LOG="$work/one.nvtx" \
  train one "${synthetic[@]}" --max-steps 1
train two "${synthetic[@]}"

# Training.
check "--max-steps 1 stops after one step record, the epoch has two" \
  test "$(records one step) $(records two step)" = "1 2"
train seed "${synthetic[@]}" --max-steps 1 --seed 1
check "--seed 1: other initial weights and order, other weights" differ seed one
train label_smoothing "${synthetic[@]}" --max-steps 1 --label-smoothing 0.5
check "--label-smoothing 0.5: the first step's loss of the same weights and batch changes" \
  test "$(first_loss label_smoothing)" != "$(first_loss one)"
train epochs "${synthetic[@]}" --epochs 2
check "--epochs 2: two epoch records and four steps, against one and two" \
  test "$(records epochs epoch) $(records epochs step) $(records two epoch)" = "2 4 1"

# The optimizer: a weight, a rate and a setting of each kind of update change the weights.
train lr "${synthetic[@]}" --max-steps 1 --lr 0.01
check "--lr 0.01: the step runs at 0.01, not 0.001, and the weights differ" \
  bash -c 'test "$1" = "0.01 " && test "$2" = "0.001 "' _ "$(rates lr)" "$(rates one)"
check "--lr 0.01: other weights" differ lr one
train weight_decay "${synthetic[@]}" --max-steps 1 --weight-decay 0.5
check "--weight-decay 0.5: other weights" differ weight_decay one
train no_decay "${synthetic[@]}" --max-steps 1 --no-decay-norm-bias
check "--no-decay-norm-bias: other weights" differ no_decay one
train eps "${synthetic[@]}" --max-steps 1 --eps 0.1
check "--eps 0.1: other weights" differ eps one
# AdamW's first step is the same for any betas (bias correction): the second shows them.
train beta1 "${synthetic[@]}" --beta1 0.5
check "--beta1 0.5: other weights after two steps" differ beta1 two
train beta2 "${synthetic[@]}" --beta2 0.5
check "--beta2 0.5: other weights after two steps" differ beta2 two
train sgd "${synthetic[@]}" --optimizer sgd
check "--optimizer sgd: other weights than adamw" differ sgd two
# SGD's first step is the same for any momentum (the buffer starts as the gradient).
train momentum "${synthetic[@]}" --optimizer sgd --momentum 0.5
check "--momentum 0.5: other weights after two steps than the default 0.9" differ momentum sgd
train nesterov "${synthetic[@]}" --optimizer sgd --nesterov
check "--nesterov: other weights" differ nesterov sgd

# The schedule: the rates each step ran at.
check "the constant rate: 0.001 both steps" test "$(rates two)" = "0.001 0.001 "
train cosine "${synthetic[@]}" --lr-schedule cosine
check "--lr-schedule cosine: half the rate at the second of two steps" \
  test "$(rates cosine)" = "0.001 0.0005 "
train warmup "${synthetic[@]}" --warmup-epochs 1
check "--warmup-epochs 1: half the rate, then the whole" test "$(rates warmup)" = "0.0005 0.001 "
train step_at_1 "${synthetic[@]}" --epochs 2 --lr-schedule step --lr-step-epochs 1
check "--lr-step-epochs 1: the rate times 0.1 from epoch 2 (the default 30 never comes)" \
  test "$(rates step_at_1)| $(rates epochs)" = \
       "0.001 0.001 0.0001 0.0001 | 0.001 0.001 0.001 0.001 "
train gamma "${synthetic[@]}" --epochs 2 --lr-schedule step --lr-step-epochs 1 --lr-gamma 0.5
check "--lr-gamma 0.5: the rate halves from epoch 2" \
  test "$(rates gamma)" = "0.001 0.001 0.0005 0.0005 "

# The data the steps see.
train augment_none "${synthetic[@]}" --max-steps 1 --augment none
check "--augment none: the unaugmented batch gives other weights than crop-flip" \
  differ augment_none one
# Unshuffled, the first batch of eight samples is samples 0-3, which a run on those four alone
# trains on too: the same weights, bit for bit. Shuffled, it is not.
train no_shuffle "${synthetic[@]}" --max-steps 1 --augment none --no-shuffle
train first_four "${synthetic[@]}" --augment none --no-shuffle --limit-train 4
check "--no-shuffle: the first batch is samples 0-3 (the weights of training on them alone)" \
  same no_shuffle first_four
check "shuffled, the first batch is another (other weights)" differ augment_none first_four
train image_size "${synthetic[@]}" --max-steps 1 --image-size 16
check "--image-size 16: 16x16 crops, near four times the FLOPs of 8x8 a training image" \
  test "$(started image_size flops_per_image)" -gt "$(($(started one flops_per_image) * 39 / 10))"
check "--image-size 16: other weights" differ image_size one
train batch_size "${synthetic[@]}" --batch-size 2
check "--batch-size 2: four steps per epoch, four step records" \
  test "$(started batch_size steps_per_epoch) $(records batch_size step)" = "4 4"
train print_every "${synthetic[@]}" --batch-size 2 --print-every 2
check "--print-every 2: two of the four steps report (lines and records)" \
  test "$(grep -c '^epoch 1/1 step' "$work/print_every.out") $(records print_every step)" = "2 2"
train limit_train "${synthetic[@]}" --limit-train 4
check "--limit-train 4: four training images, one step per epoch" \
  test "$(started limit_train train_images) $(started limit_train steps_per_epoch)" = "4 1"
train limit_val "${synthetic[@]}" --max-steps 1 --limit-val 2
check "--limit-val 2: two validation images, not four" \
  test "$(started limit_val val_images) $(started one val_images)" = "2 4"

# The model.
train stem "${synthetic[@]}" --max-steps 1 --stem imagenet
check "--stem imagenet: a 7x7 stem convolution, a larger weights file" \
  test "$(stat -c %s "$work/stem.rddp")" -gt "$(stat -c %s "$work/one.rddp")"

# Weights: --save-weights wrote the trained weights, --init starts from them, --eval evaluates
# them without a step: the validation loss of the run that wrote them, to the last digit.
"$RDDP_BIN" --dataset synthetic "${cpu[@]}" --init "$work/two.rddp" --eval \
  --log-json "$work/eval.jsonl" >"$work/out" 2>&1 || failed "--init two.rddp --eval did not finish"
check "--eval: an eval record and no step" test "$(grep -c '"type":"eval"' "$work/eval.jsonl") \
$(grep -c '"type":"step"' "$work/eval.jsonl")" = "1 0"
check "--save-weights, --init: the loaded weights give the writer's final validation loss" \
  test "$(val_loss eval eval)" = "$(val_loss two epoch)"
check "--log-json: a start, a record per step and per epoch" \
  test "$(records two start) $(records two step) $(records two epoch)" = "1 2 1"

# Checkpoints: 12 images are three steps; every checkpoint of the run, and those kept.
# The run's lock file stays beside them; only the checkpoints count.
checkpoints() { (cd "$work/$1" && ls checkpoint-*) | tr '\n' ' '; }
train checkpoint_dir "${synthetic[@]}" --limit-train 12 --checkpoint-dir "$work/ck"
check "--checkpoint-dir: a checkpoint at the epoch's end" \
  test "$(checkpoints ck)" = "checkpoint-0000000003.rddp "
train checkpoint_every "${synthetic[@]}" --limit-train 12 --checkpoint-dir "$work/ck_every" \
  --checkpoint-every 1
check "--checkpoint-every 1: a checkpoint each step" test "$(checkpoints ck_every)" = \
  "checkpoint-0000000001.rddp checkpoint-0000000002.rddp checkpoint-0000000003.rddp "
train keep "${synthetic[@]}" --limit-train 12 --checkpoint-dir "$work/ck_keep" \
  --checkpoint-every 1 --keep-checkpoints 2
check "--keep-checkpoints 2: the newest two are kept" \
  test "$(checkpoints ck_keep)" = "checkpoint-0000000002.rddp checkpoint-0000000003.rddp "

# Gradients: the buckets the reducer sends, and their type.
NVTX_INJECTION64_PATH=$RDDP_NVTX_RECORDER RDDP_NVTX_LOG="$work/buckets.nvtx" \
  train bucket_mb "${synthetic[@]}" --max-steps 1 --bucket-mb 2
check "--bucket-mb 2: 9 bucket allreduces in the step, against 3 at 25 MiB" \
  test "$(grep -c 'allreduce bucket' "$work/buckets.nvtx")" = 9 -a \
       "$(grep -c 'allreduce bucket' "$work/one.nvtx")" = 3
train grad_bf16 "${synthetic[@]}" --max-steps 1 --grad-allreduce bf16
check "--grad-allreduce bf16: gradients rounded to bfloat16, other weights" differ grad_bf16 one

# Loader threads: counted by name early in an epoch of 64 steps, while every worker has batches
# left to fill; the run is then ended.
loader_threads() {
  : >"$work/out"
  "$RDDP_BIN" --dataset synthetic "${cpu[@]}" --epochs 1 --limit-train 256 --print-every 1 \
    --num-workers "$1" >"$work/out" 2>&1 &
  local job=$! count=none
  for _ in $(seq 600); do grep -q "step 1/64" "$work/out" && break; sleep 0.1; done
  grep -q "step 1/64" "$work/out" && count=$(cat /proc/$job/task/*/comm | grep -cx "rddp loader")
  kill -KILL $job 2>/dev/null
  wait $job 2>/dev/null
  echo "$count"
}
check "--num-workers 3 and 1: as many loader threads" \
  test "$(loader_threads 3) $(loader_threads 1)" = "3 1"

# Data from files: an image folder of two classes, and a pack of it beside it.
ppm() {
  mkdir -p "$(dirname "$1")"
  { printf 'P6\n12 10\n255\n'; head -c 360 /dev/urandom; } >"$1"
}
for class in ant bee; do
  for i in 1 2 3 4; do ppm "$work/folder/train/$class/$i.ppm"; done
  ppm "$work/folder/val/$class/v.ppm"
done
folder=(--data "$work/folder" "${cpu[@]}" --epochs 1 --max-steps 1)
train folder "${folder[@]}"
check "--data: the run reads the folder given (8 training images, 2 classes)" \
  grep -qE "^  data +image folder .*$work/folder/train.*8 images.*2 classes" "$work/folder.out"
train val_split "${folder[@]}" --val-split 0.5
check "--val-split 0.5: half the training folder validates, in place of val/" \
  test "$(started val_split train_images) $(started val_split val_images)" = "4 4" -a \
       "$(started folder val_images)" = 2
"$RDDP_PACK_BIN" "$work/folder" "$work/both" --size 12 >"$work/out" 2>&1 ||
  failed "the pack was not written"
cp -r "$work/folder/train" "$work/folder/val" "$work/both/"
train detected --data "$work/both" "${cpu[@]}" --epochs 1 --max-steps 1
train image_folder --data "$work/both" --dataset imagefolder "${cpu[@]}" --epochs 1 --max-steps 1
check "--dataset imagefolder: the folder's images where detection picks the pack beside them" \
  bash -c 'grep -qE "^  data +packed train" "$1" && grep -qE "^  data +image folder" "$2"' _ \
  "$work/detected.out" "$work/image_folder.out"
# Ten classes' weights on two classes' data: refused with the fix, which then works.
expect 1 "The data has 2 classes and the weights were trained for 10: add --init-reset-classifier" \
  -- \
  "$RDDP_BIN" "${folder[@]}" --init "$work/two.rddp"
check "the refusal names flags of --help only" names_real_flags "$work/out"
expect 0 "init: .*fc" -- "$RDDP_BIN" "${folder[@]}" --init "$work/two.rddp" --init-reset-classifier
finish
