#!/usr/bin/env bash
# Faults while training: the loss turning NaN, a checkpoint that cannot be written (a bad
# directory, a full disk) and a data file that disappears mid-run. Each ends the run with a
# message naming the step or the file, and loses nothing that was already saved.
. "$(dirname "$0")/lib.sh"
# 16x16 crops of the synthetic images: three times as fast on the CPU as 32x32.
train=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 32 --limit-val 8 --print-every 1
       --image-size 16)

# A learning rate far too high: the loss overflows, and training stops with the steps and a hint.
expect 1 "training loss became (NaN|infinite) in epoch [0-9]+ between global steps [0-9]+ and [0-9]+.*Lower the learning rate" -- \
  "${train[@]}" --optimizer sgd --lr 1000 --epochs 3

# A checkpoint directory that cannot exist (a regular file stands in its way).
touch "$work/not-a-directory"
expect 1 "--checkpoint-dir '$work/not-a-directory/ck': cannot create it" -- \
  "${train[@]}" --epochs 1 --checkpoint-dir "$work/not-a-directory/ck"

# A full disk: the first run checkpoints; the resumed one may write no more than 20 MB, so
# its checkpoint fails. The error names the file and the reason, and the earlier checkpoint
# is untouched, with no temporary left behind. (SIGXFSZ ignored: write() then fails with
# EFBIG, as on a full file system, instead of the signal killing the process.)
expect 0 "checkpoint .*checkpoint-0000000004.rddp" -- "${train[@]}" --epochs 1 --checkpoint-dir "$work/ck"
before=$(md5sum <"$work/ck/checkpoint-0000000004.rddp")
expect 1 "checkpoint-0000000008.rddp.*(File too large|No space)" -- \
  bash -c 'trap "" XFSZ; ulimit -f 20000; exec "$@"' limited "${train[@]}" --epochs 2 --checkpoint-dir "$work/ck" --resume
check "the earlier checkpoint is intact" test "$(md5sum <"$work/ck/checkpoint-0000000004.rddp")" = "$before"
check "no temporary file is left" test -z "$(ls "$work/ck" | grep -v '^checkpoint-0000000004.rddp$' | grep -v '^resnet_ddp.lock$')"

# A data file that disappears while training: the next epoch that needs it stops the run,
# naming the file.
/usr/bin/env python3 "$RDDP_SOURCE_DIR/data/fashion_mnist_to_folder.py" --out "$work/folder" \
  --train-per-class 2 --val-per-class 1 >/dev/null || failed "could not make the image folder"
victim=$(find "$work/folder/train" -name '*.png' | sort | tail -1)
: >"$work/out"  # before the job starts, so that the wait below cannot see an earlier run's step
"$RDDP_BIN" --data "$work/folder" --device cpu --image-size 28 --batch-size 4 --epochs 50 --print-every 1 \
  >"$work/out" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q "step 1/" "$work/out" && break; sleep 0.1; done
rm -f "$victim"
timeout 120 tail --pid=$job -f /dev/null
wait $job
status=$?
check "the run stopped non-zero after a data file disappeared (status $status)" test "$status" -ne 0
check "the message names the missing file" grep -q "$victim" "$work/out"
finish
