#!/usr/bin/env bash
# A preemption signal (Slurm's KillWait leaves 30 s) is honoured within seconds wherever it
# comes: during a long evaluation the run stops after the batch in progress, with a checkpoint
# that keeps the epoch's training, exits 75, and --resume evaluates that epoch again rather than
# train it again; while the image folder is listed (here a hung mount) it exits 75 at once.
. "$(dirname "$0")/lib.sh"
: "${RDDP_HANG_OPEN_LIB:?set RDDP_HANG_OPEN_LIB to the library that makes an open hang}"

# wait_for PATTERN: until the output of the run in the background shows PATTERN (60 s at most).
wait_for() {
  for _ in $(seq 600); do grep -q "$1" "$work/out" && return 0; sleep 0.1; done
  failed "the run never printed '$1'"
}
# signal_and_time SIGNAL PID: sends SIGNAL and waits for PID; sets status and seconds (from the
# signal to the exit, in tenths).
signal_and_time() {
  local start
  start=$(date +%s%N)
  kill "-$1" "$2"
  wait "$2"
  status=$?
  tenths=$((($(date +%s%N) - start) / 100000000))
}

# 921 validation images (90 % of the synthetic set held out) take minutes to evaluate on one
# core; 4 training steps an epoch.
run=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-train 32 --val-split 0.9 --epochs 2
     --print-every 1 --checkpoint-dir "$work/ck")
: >"$work/out"
OMP_NUM_THREADS=1 "${run[@]}" >"$work/out" 2>&1 &
job=$!
wait_for "epoch 1/2: evaluating on 921 validation images"
sleep 1
signal_and_time TERM "$job"
check "SIGTERM during the evaluation: exit 75 (got $status)" test "$status" = 75
check "... within 10 s of the signal (took $((tenths / 10)).$((tenths % 10)) s)" test "$tenths" -lt 100
check "... saying so" grep -q "preempted (SIGTERM) during the evaluation of epoch 1: checkpointing and exiting with code 75" "$work/out"
check "... before the evaluation ended" test -z "$(grep "epoch 1/2: train loss" "$work/out")"
check "... with the trained epoch's checkpoint" test -f "$work/ck/checkpoint-0000000004.rddp"

# The resumed run evaluates epoch 1 first, trains none of it again, then trains epoch 2. (Fewer
# validation images keep this short; they change nothing of what is resumed.)
expect 0 "resume: epoch 1 was trained but not evaluated when the checkpoint was written; its evaluation comes first" -- \
  "${run[@]}" --resume --limit-val 16
check "epoch 1 is evaluated, not trained" grep -qE "^epoch 1/2: trained before the resume \| val loss [0-9.]+ acc" "$work/out"
check "no step of epoch 1 is taken again" test -z "$(grep "epoch 1/2 step" "$work/out")"
check "epoch 2 trains its 4 steps" grep -q "^epoch 2/2 step 4/4" "$work/out"
check "the last checkpoint is at global step 8" test -f "$work/ck/checkpoint-0000000008.rddp"

# A signal after the epoch's last step, before or during its evaluation, resumes the same way.
rm -rf "$work/ck"
: >"$work/out"
OMP_NUM_THREADS=1 "${run[@]}" >"$work/out" 2>&1 &
job=$!
wait_for "epoch 1/2 step 4/4"
kill -USR1 "$job"
wait "$job"
status=$?
check "SIGUSR1 after the epoch's last step: exit 75 (got $status)" test "$status" = 75
check "... stopping at that step or in the evaluation" \
  grep -qE "preempted \(SIGUSR1\) (at epoch 1 step 4|during the evaluation of epoch 1):" "$work/out"
expect 0 "resume: epoch 1 was trained but not evaluated" -- "${run[@]}" --resume --limit-val 16 --epochs 1
check "... evaluated after the resume, trained no further" grep -qE "^epoch 1/1: trained before the resume \| val loss" "$work/out"

# The image folder's listing hangs (a hung mount): SIGTERM ends the run at once with code 75.
for class in ant bee; do
  mkdir -p "$work/folder/train/$class" "$work/folder/val/$class"
  for i in 1 2; do
    { printf 'P6\n8 8\n255\n'; head -c 192 /dev/urandom; } >"$work/folder/train/$class/$i.ppm"
    cp "$work/folder/train/$class/$i.ppm" "$work/folder/val/$class/$i.ppm"
  done
done
: >"$work/out"
RDDP_HANG_OPEN=train/bee LD_PRELOAD="$RDDP_HANG_OPEN_LIB" "$RDDP_BIN" --data "$work/folder" --device cpu \
  --epochs 1 >"$work/out" 2>&1 &
job=$!
sleep 2
signal_and_time TERM "$job"
check "SIGTERM while the listing hangs: exit 75 (got $status)" test "$status" = 75
check "... within 2 s (took $((tenths / 10)).$((tenths % 10)) s)" test "$tenths" -lt 20
check "... saying so" grep -q "preempted (SIGTERM) while rank 0 listed $work/folder/train (for [0-9]* s): exiting with code 75 before training" "$work/out"
finish
