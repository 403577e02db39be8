#!/usr/bin/env bash
# What a checkpoint directory may hold that --resume must not pass over: a newest checkpoint of
# a newer format version, or one this user cannot read, is refused (resuming from an older one
# would lose its progress and this run's checkpoints would replace it), while a damaged one is
# still passed over (test_resume.sh). A run resumed with other settings than the checkpoint's
# says which. A symbolic link planted as the lock file is not followed. Paths with control
# characters reach the terminal written out, and the metrics log as valid JSON. A metrics log
# deleted mid-run is reported.
. "$(dirname "$0")/lib.sh"
run=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 32 --limit-val 8 --print-every 1
     --image-size 16 --checkpoint-dir "$work/ck")

expect 0 "checkpoint .*checkpoint-0000000008.rddp" -- "${run[@]}" --epochs 2
cp "$work/ck/checkpoint-0000000008.rddp" "$work/eight.rddp"

# The format version (after the 8-byte magic) of the newest, made 2.
printf '\x02' | dd of="$work/ck/checkpoint-0000000008.rddp" bs=1 seek=8 conv=notrunc status=none
expect 1 "error: --resume: '$work/ck/checkpoint-0000000008.rddp' uses format version 2, newer than this build of resnet_ddp reads \(1\): use the resnet_ddp that wrote it, or a newer one \(resuming from an older checkpoint now would lose its progress" -- \
  "${run[@]}" --epochs 3 --resume
check "nothing was trained" test -z "$(grep "step 1/" "$work/out")"
check "the newer checkpoint is still there" test -f "$work/ck/checkpoint-0000000008.rddp"
cp "$work/eight.rddp" "$work/ck/checkpoint-0000000008.rddp"

# Readable by its owner only, resumed by another user (as root: nobody).
if [ "$(id -u)" = 0 ]; then
  chmod 755 "$work"
  chmod 777 "$work/ck"
  chmod 600 "$work/ck/checkpoint-0000000008.rddp"
  expect 1 "error: --resume: cannot read '$work/ck/checkpoint-0000000008.rddp': Permission denied\. Give this user read access to it" -- \
    setpriv --reuid=nobody --regid=nogroup --clear-groups "${run[@]}" --epochs 3 --resume
  chmod 644 "$work/ck/checkpoint-0000000008.rddp"
else
  echo "skipped: a checkpoint another user cannot read (needs root to play the other user)"
fi

# Resumed with other settings (a job script edited between requeues): a warning lists them.
expect 0 "warning: resume: this run's settings differ from those of the run that wrote the checkpoint: --epochs: 3 now, 2 then; --label-smoothing: 0.1 now, not given then; --seed: 5 now, not given then\. Training goes on" -- \
  "${run[@]}" --epochs 3 --resume --seed 5 --label-smoothing 0.1
check "--resume itself is not a difference" test -z "$(grep "resume: given" "$work/out")"

# A symbolic link planted where the lock file goes, leading to a file of the user's.
echo "keep me" >"$work/precious"
rm -f "$work/ck/resnet_ddp.lock"
ln -s "$work/precious" "$work/ck/resnet_ddp.lock"
expect 1 "error: --checkpoint-dir '$work/ck': cannot use its lock file '$work/ck/resnet_ddp.lock': it is not a regular file" -- \
  "${run[@]}" --epochs 4 --resume
check "the file the link leads to is untouched" test "$(cat "$work/precious")" = "keep me"
rm "$work/ck/resnet_ddp.lock"

# A directory name with a newline and a terminal escape, as the terminal receives it.
odd="$work/odd"$'\n'"[rank 0/1 vm] error: forged"$'\e[2J'
expect 0 "checkpoint $work/odd\\\\n\[rank 0/1 vm\] error: forged\\\\x1b\[2J/checkpoint-0000000004.rddp" -- \
  "${run[@]}" --checkpoint-dir "$odd" --epochs 1
check "no line of the run's output starts with the forged text" test -z "$(grep -a "^\[rank 0/1 vm\] error: forged" "$work/out")"
check "no escape character reaches the terminal" test -z "$(grep -a $'\e' "$work/out")"
# In the metrics log, the same name and a byte that is not UTF-8 (a name in another encoding).
expect 0 "epoch 1/1: train loss" -- "${run[@]}" --checkpoint-dir "$work/ck3" --epochs 1 --data "$odd"$'\xff' \
  --log-json "$work/odd.jsonl"
check "every line of the metrics log is JSON, the odd name in it escaped" /usr/bin/env python3 -c '
import json, sys
records = [json.loads(line) for line in open(sys.argv[1], "rb")]
assert records[0]["data"] == sys.argv[2] + "\ufffd", records[0]["data"]
' "$work/odd.jsonl" "$odd"

# The metrics log deleted while the run writes it.
: >"$work/out"
"${run[@]}" --checkpoint-dir "$work/ck2" --epochs 50 --log-json "$work/log.jsonl" >"$work/out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "step 2/" "$work/out" && break; sleep 0.1; done
rm "$work/log.jsonl"
for _ in $(seq 600); do grep -q "step 4/" "$work/out" && break; sleep 0.1; done
kill -TERM "$job"
wait "$job"
check "a deleted metrics log is reported" grep -q "warning: --log-json: '$work/log.jsonl' was deleted while this run writes it" "$work/out"
finish
