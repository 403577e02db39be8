#!/usr/bin/env bash
# One run at a time writes a checkpoint directory: a second run given the same --checkpoint-dir
# is refused before any work, naming the run that holds it (pid, host, Slurm job) and the fix,
# whatever its seed; --eval, which only reads, is not. The lock goes with the process: after a
# SIGKILL the next run resumes at once. Temporaries of checkpoint writes that a killed run left
# are removed by the next run that holds the lock.
. "$(dirname "$0")/lib.sh"
common=("$RDDP_BIN" --dataset synthetic --device cpu --batch-size 8 --limit-val 8 --image-size 16
        --checkpoint-dir "$work/ck")
run=("${common[@]}" --limit-train 32 --print-every 1)

: >"$work/first"
SLURM_JOB_ID=4242 "${run[@]}" --epochs 1000 >"$work/first" 2>&1 &
first=$!
for _ in $(seq 600); do grep -q "^checkpoint " "$work/first" && break; sleep 0.1; done
grep -q "^checkpoint " "$work/first" || { cat "$work/first"; failed "the first run wrote no checkpoint"; }

expect 1 "error: --checkpoint-dir '$work/ck' is in use by another run: resnet_ddp pid $first on host $(hostname) \(Slurm job 4242\), started [0-9-]+ [0-9:]+ UTC holds '$work/ck/resnet_ddp.lock'\. Two runs that write one directory resume and remove each other's checkpoints: give this run a --checkpoint-dir of its own" -- \
  "${run[@]}" --epochs 2 --seed 7 --resume
check "the second run was refused before any step" test -z "$(grep "step 1/" "$work/out")"
expect 1 "is in use by another run: resnet_ddp pid $first" -- "${run[@]}" --epochs 2
expect 0 "validation: loss" -- "${common[@]}" --eval --resume
check "the first run trains on" kill -0 "$first"

kill -KILL "$first"
wait "$first" 2>/dev/null
# What a run killed in the middle of a checkpoint write leaves where the file system has no
# unnamed temporaries; the next run that holds the lock removes it, and nothing else.
echo "half a checkpoint" >"$work/ck/checkpoint-0000000099.rddp.tmp.12345"
echo "notes" >"$work/ck/notes.txt"
expect 0 "removed checkpoint-0000000099.rddp.tmp.12345 from $work/ck: the temporary of a checkpoint write that a stopped run left" -- \
  "${run[@]}" --epochs 1000 --max-steps 1 --resume
check "the run killed with SIGKILL left no stale lock: the next one resumed" grep -q "start .*checkpoint-" "$work/out"
check "the temporary is gone" test ! -e "$work/ck/checkpoint-0000000099.rddp.tmp.12345"
check "other files stay" test -f "$work/ck/notes.txt"
finish
