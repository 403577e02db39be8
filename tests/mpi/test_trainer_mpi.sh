#!/usr/bin/env bash
# The resnet_ddp program under mpirun: two ranks train to bit-identical weights
# (with float32 and with bfloat16 gradient allreduce), and a rank whose weights drift from rank
# 0's (it resumed another run's checkpoint) ends the job at the epoch's end;
# a preemption signal on one rank checkpoints and ends every rank with code 75, and the job
# resumes; a rank killed mid-run ends the whole job promptly, with messages, and a rank stopped
# mid-run ends it after --comm-timeout. DEVICE is the --device the ranks train on: cpu (the
# default), or cuda, for the GPU path (NCCL) with one GPU per rank.
#   test_trainer_mpi.sh MPIEXEC [MPIEXEC FLAGS...] -- RESNET_DDP [DEVICE]
set -u
mpiexec=()
while [[ $1 != "--" ]]; do mpiexec+=("$1"); shift; done
bin=$2
device=${3:-cpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checks=0
fail() { echo "FAILED: $1"; sed 's/^/  | /' "$work/out"; exit 1; }
ok() { checks=$((checks + 1)); echo "ok $checks: $1"; }

# signal_rank_1 SIGNAL ARGUMENT: once the job in the background has printed its second step,
# sends SIGNAL to its rank 1, found among the processes whose command line holds ARGUMENT; its
# process id is left in `signalled`.
signal_rank_1() {
  for _ in $(seq 600); do grep -q "step 2/4" "$work/out" && break; sleep 0.1; done
  local pid
  pid=$(pgrep -f -- "$2" | while read -r candidate; do
    tr '\0' '\n' </proc/$candidate/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && echo "$candidate"; done | head -1)
  [ -n "$pid" ] || fail "rank 1's process not found"
  kill "-$1" "$pid"
  signalled=$pid
}

# 16x16 crops of the synthetic images: on the CPU, and on the emulator that checks the CUDA path
# there, the convolutions cost most, and what is checked here does not depend on the size.
train=("$bin" --dataset synthetic --device "$device" --batch-size 8 --limit-train 64 --limit-val 16 --print-every 1
       --image-size 16)

"${mpiexec[@]}" -n 2 "${train[@]}" --epochs 1 --save-weights "$work/w-{rank}.rddp" \
  --log-json "$work/metrics.jsonl" >"$work/out" 2>&1 || fail "two ranks did not train"
grep -q "world size       2 ranks" "$work/out" || fail "rank 0 does not report world size 2"
[ "$(grep -c 'world size' "$work/out")" = 1 ] || fail "the settings table must come from rank 0 only"
cmp -s "$work/w-0.rddp" "$work/w-1.rddp" || fail "the ranks end with different weights"
grep -q "device           $device" "$work/out" || fail "rank 0 does not report --device $device"
grep -q "replica check    every rank's weights and optimizer state against rank 0's" "$work/out" ||
  fail "rank 0 does not report the replica check"
ok "2 ranks on $device: world size 2 reported once, bit-identical weights on both ranks"
# The epoch line gives rank 0's data wait and the largest of any rank, which the JSON keeps too.
grep -Eq "data wait [0-9.]+% \(most: rank [01], [0-9.]+%\)" "$work/out" ||
  fail "the epoch line does not name the rank that waited the most for its data"
grep '"type":"epoch"' "$work/metrics.jsonl" |
  grep -Eq '"data_wait_share_max":[0-9.e-]+,"data_wait_share_max_rank":[01][,}]' ||
  fail "the epoch record lacks data_wait_share_max and its rank: $(cat "$work/metrics.jsonl")"
ok "2 ranks on $device: the epoch line and record name the rank that waited the most for data"

# --cuda-graphs on with two ranks: the step is captured with its bucket allreduces (the comm
# stream joins the capture) and replayed; two epochs of 4 steps are 3 eager warm-up steps, the
# capture and 4 replays, with the replica check's and the evaluation's collectives between them.
# The weights are the eager run's, bit for bit, on both ranks.
if [ "$device" = cuda ]; then
  "${mpiexec[@]}" -n 2 "${train[@]}" --epochs 2 --cuda-graphs on --save-weights "$work/g-{rank}.rddp" \
    >"$work/out" 2>&1 || fail "two ranks did not train with --cuda-graphs on"
  grep -q "cuda graphs: 5 of 8 training steps replayed from the graph" "$work/out" ||
    fail "rank 0 does not report 5 of 8 steps replayed"
  "${mpiexec[@]}" -n 2 "${train[@]}" --epochs 2 --save-weights "$work/e-{rank}.rddp" >"$work/out" 2>&1 ||
    fail "two ranks did not train eagerly for two epochs"
  cmp -s "$work/g-0.rddp" "$work/g-1.rddp" || fail "with --cuda-graphs on the ranks end with different weights"
  cmp -s "$work/g-0.rddp" "$work/e-0.rddp" || fail "--cuda-graphs on did not give the eager run's weights"
  ok "2 ranks, --cuda-graphs on: 5 of 8 steps replayed with their allreduces, the eager run's weights bit for bit"
  # bfloat16 buckets: the casts into the staging slices and back are captured too.
  for graphs in on off; do
    "${mpiexec[@]}" -n 2 "${train[@]}" --epochs 2 --grad-allreduce bf16 --cuda-graphs $graphs \
      --save-weights "$work/gb-$graphs-{rank}.rddp" >"$work/out" 2>&1 ||
      fail "two ranks did not train with --grad-allreduce bf16 --cuda-graphs $graphs"
  done
  cmp -s "$work/gb-on-0.rddp" "$work/gb-off-0.rddp" && cmp -s "$work/gb-on-0.rddp" "$work/gb-on-1.rddp" ||
    fail "with --grad-allreduce bf16, --cuda-graphs on did not give the eager run's weights on both ranks"
  ok "2 ranks, --grad-allreduce bf16 --cuda-graphs on: the eager run's weights bit for bit"
fi

# Replicas that drift apart end the job at the epoch's end, and before any checkpoint. Here each
# rank resumes from a checkpoint directory of its own node (one relative --checkpoint-dir, two
# working directories) that holds a checkpoint of the same step written by another run: rank 0's
# weights reach rank 1 at start, but rank 1's optimizer state stays another. (Ranks started with
# other flags are refused before this, at start: mpi.rank_settings_np2.)
for node in 0 1; do
  mkdir -p "$work/node$node"
  (cd "$work/node$node" && "${mpiexec[@]}" -n 2 "${train[@]}" --epochs 1 --checkpoint-dir ck --lr 0.00$((node + 1))) \
    >"$work/out" 2>&1 || fail "the run that writes node $node's checkpoint failed"
done
resume_on() { echo env -C "$work/node$1" "${train[@]}" --epochs 3 --checkpoint-dir ck --resume; }
# shellcheck disable=SC2046
drift() { "${mpiexec[@]}" -n 1 $(resume_on 0) "$@" : -n 1 $(resume_on 1) "$@"; }
drift_reported() {
  for rank in 0 1; do
    grep -q "\[rank $rank/2 [^]]*\] error: $1, the weights and optimizer state of 1 of 2 ranks differ from rank 0's (the first: rank 1;" \
      "$work/out" || fail "rank $rank did not report the drift $1"
  done
}
drift >"$work/out" 2>&1 && fail "ranks with different weights trained on"
drift_reported "after epoch 2 (global step 8)"
grep -q "epoch 3/3" "$work/out" && fail "training went on after the replicas drifted"
drift --checkpoint-every 2 >"$work/out" 2>&1 && fail "ranks with different weights trained on"
drift_reported "at step 2 of epoch 2 (global step 6)"
[ "$(cd "$work/node0/ck" && echo checkpoint-*.rddp)" = checkpoint-0000000004.rddp ] ||
  fail "a checkpoint was written of drifted replicas"
ok "rank 1 resumed another run's optimizer state: both ranks stop naming rank 1, after the epoch, or at the first --checkpoint-every checkpoint, writing none"

# --grad-allreduce bf16: the same training with gradients sent as bfloat16. The weights still
# agree to the bit across ranks, and differ from the float32 run's (the rounding is real).
"${mpiexec[@]}" -n 2 "${train[@]}" --epochs 1 --grad-allreduce bf16 --save-weights "$work/b-{rank}.rddp" \
  >"$work/out" 2>&1 || fail "two ranks did not train with --grad-allreduce bf16"
grep -q "grad allreduce  *bf16: sent and summed as bfloat16" "$work/out" ||
  fail "the settings table does not show the bf16 gradient allreduce"
grep -q "epoch 1/1: train loss" "$work/out" || fail "the bf16 run did not finish its epoch"
cmp -s "$work/b-0.rddp" "$work/b-1.rddp" || fail "with bf16 the ranks end with different weights"
cmp -s "$work/b-0.rddp" "$work/w-0.rddp" && fail "bf16 and fp32 gradients gave the very same weights"
ok "2 ranks, --grad-allreduce bf16: trains, bit-identical weights on both ranks, not those of fp32"

# Preemption: SIGUSR1 to rank 1 only; all ranks agree at the next step, rank 0 checkpoints.
# The output file is emptied here, not only by the job's own redirection: that happens in the
# background, and until it does the file holds the last run's "step 2/4".
: >"$work/out"
"${mpiexec[@]}" -n 2 "${train[@]}" --epochs 3 --checkpoint-dir "$work/ck" >"$work/out" 2>&1 &
job=$!
signal_rank_1 USR1 "--checkpoint-dir $work/ck"
wait "$job"
status=$?
[ "$status" = 75 ] || fail "a preempted job must end with 75, got $status"
grep -q "preempted (on another rank) at epoch 1" "$work/out" || fail "no preemption message"
ls "$work/ck"/checkpoint-*.rddp >/dev/null 2>&1 || fail "no checkpoint after preemption"
ok "SIGUSR1 on rank 1: checkpoint by rank 0, every rank exits 75"
"${mpiexec[@]}" -n 2 "${train[@]}" --epochs 3 --checkpoint-dir "$work/ck" --resume >"$work/out" 2>&1 ||
  fail "the resumed job did not finish"
grep -q "start            .*checkpoint-" "$work/out" || fail "the resumed job did not say where it resumed"
grep -q "epoch 3/3: train loss" "$work/out" || fail "the resumed job did not finish its epochs"
ok "the requeued job resumes from the checkpoint and finishes"

# kill_rank_1 WHAT WAIT_FOR [FLAGS...]: a job of 50 epochs with FLAGS, rank 1 killed once the
# output holds WAIT_FOR; the launcher and the watchdog end the job, and rank 0 says why.
kill_rank_1() {
  local what=$1 wait_for=$2 start status elapsed job
  shift 2
  start=$(date +%s)
  : >"$work/out"
  timeout -k 5 90 "${mpiexec[@]}" -n 2 "${train[@]}" --epochs 50 --comm-timeout 20 "$@" >"$work/out" 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q "$wait_for" "$work/out" && break; sleep 0.1; done
  signal_rank_1 KILL "--epochs 50 --comm-timeout 20${*:+ $*}"
  wait "$job"
  status=$?
  elapsed=$(($(date +%s) - start))
  [ "$status" != 0 ] || fail "$what: the job ended with status 0 after a rank was killed"
  [ "$status" != 124 ] || fail "$what: the job hung after a rank was killed"
  grep -Eq "\[rank 0/2 [^]]+\] (received SIGTERM|terminated by SIGTERM|.*did not complete)" "$work/out" ||
    fail "$what: rank 0 did not say why it stopped"
  ok "$what: the job ended with status $status after ${elapsed} s, rank 0 said why"
}
kill_rank_1 "rank 1 killed" "step 2/4"
# The same while the steps are replayed from a CUDA graph, their allreduces inside the replays.
[ "$device" != cuda ] || kill_rank_1 "rank 1 killed during graph replays" "epoch 2/50" --cuda-graphs on

# --comm-timeout: rank 1 stopped (SIGSTOP) mid-epoch leaves rank 0 waiting in a collective; rank
# 0's watchdog ends the job after the 3 s given (the default would wait 600 s), naming the wait.
start=$(date +%s)
: >"$work/out"
timeout -k 5 90 "${mpiexec[@]}" -n 2 "${train[@]}" --epochs 50 --comm-timeout 3 >"$work/out" 2>&1 &
job=$!
signal_rank_1 STOP "--epochs 50 --comm-timeout 3"
wait "$job"
status=$?
elapsed=$(($(date +%s) - start))
kill -KILL "$signalled" 2>/dev/null  # in case the launcher left it stopped
[ "$status" != 0 ] && [ "$status" != 124 ] ||
  fail "--comm-timeout 3: the job ended with status $status"
grep -Eq "\[rank 0/2 [^]]+\] .* did not complete in 3 s" "$work/out" ||
  fail "--comm-timeout 3: rank 0's watchdog did not name the collective that waited 3 s"
ok "--comm-timeout 3, rank 1 stopped: rank 0's watchdog ended the job after ${elapsed} s"
echo "$checks passed, 0 failed"
