#!/usr/bin/env bash
# The PBS job scripts (scripts/pbs/*.pbs) run as PBS runs them: a copy of the script started with
# bash, in a session of its own, from another directory, with the variables PBS sets
# (PBS_NODEFILE naming this machine twice, as select=1:ncpus=2:ngpus=2:mpiprocs=2 gives it,
# PBS_O_WORKDIR, PBS_JOBID, PBS_JOBNAME, PBS_QUEUE, NCPUS, OMP_NUM_THREADS, and
# CUDA_VISIBLE_DEVICES as the cgroup hook sets it), resnet_ddp training tiny synthetic images on
# the CPU over mpiexec with 2 ranks, and stand-ins for qstat (the job's resources and walltime),
# qrerun (which ends the job, as PBS does) and qsub. Checked: the walltime timer checkpoints and
# qrerun runs the job again, which resumes; a SIGTERM to the whole job (qdel, preemption)
# checkpoints without running it again, and the job resumes when run again; where qrerun is
# refused, qsub submits the job again with its resources and checkpoint directory, and that job
# resumes from it; a rank count that does not match the GPUs is refused.
#   test_pbs_scripts.sh MPIEXEC [MPIEXEC FLAGS...] -- RESNET_DDP
set -u
mpiexec=()
while [[ $1 != "--" ]]; do mpiexec+=("$1"); shift; done
bin=$2
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
job=''
# The job's processes: its session (mpiexec may give the ranks process groups of their own).
trap '[ -z "$job" ] || pkill -KILL -s "$job"; rm -rf "$work"' EXIT
checks=0
fail() { echo "FAILED: $1"; sed 's/^/  | /' "$work/out"; exit 1; }
ok() { checks=$((checks + 1)); echo "ok $checks (${SECONDS} s): $1"; }
expect_out() { grep -qE -- "$1" "$work/out" || fail "no line matching /$1/ in the job's output"; }

# The source tree the job runs in, the home directory PBS starts it in, its spool.
tree=$work/tree
mkdir -p "$tree/build" "$tree/scripts" "$work/bin" "$work/home" "$work/spool"
cp -r "$source_dir/scripts/pbs" "$source_dir/scripts/wait_step.sh" "$tree/scripts/"
ln -s "$bin" "$tree/build/resnet_ddp"
printf '%s\n%s\n' "$(hostname)" "$(hostname)" >"$work/nodefile"
cat >"$work/bin/qstat" <<'EOF'
#!/bin/bash
# qstat -f JOBID as PBS prints it: a long value goes on, on a line that starts with a tab.
[ "$1" = -f ] || exit 2
printf '%s\n' "Job Id: $2" "    Job_Name = resnet_ddp" "    Account_Name = my_account" \
  "    Resource_List.place = excl" "    Resource_List.select = 1:ncpus=2:ngpus=2:mpip" \
  "	rocs=2" "    Resource_List.walltime = ${TEST_WALLTIME:-24:00:00}" "    queue = workq"
EOF
cat >"$work/bin/qrerun" <<'EOF'
#!/bin/bash
# Accepted, PBS kills every process of the job and queues it again; or refused to its owner.
echo "$*" >>"$TEST_CALLS/qrerun"
if [ "${TEST_QRERUN:-}" = refuse ]; then
  echo "qrerun: Unauthorized Request  $1" >&2
  exit 1
fi
sleep 0.5
pkill -KILL -s "$(ps -o sid= -p "$PPID" | tr -d ' ')"
EOF
cat >"$work/bin/qsub" <<'EOF'
#!/bin/bash
printf '%s\n' "$@" >"$TEST_CALLS/qsub"
echo 105.pbs-test
EOF
chmod +x "$work/bin/"*
mkdir -p "$work/calls"

# 16x16 crops of the synthetic images, 8 steps an epoch on two ranks, for as long as the job
# lets them: until the walltime's checkpoint or a SIGTERM.
flags="--dataset synthetic --device cpu --image-size 16 --batch-size 8 --limit-train 128"
flags+=" --limit-val 16 --epochs 1000 --print-every 1"
# start_job SCRIPT JOBID [VAR=VALUE...]: the job in the background, leading a session of its own
# (pid $job), as PBS starts a job; its output in $work/out, its exit status in $work/status.
start_job() {
  local script=$1 id=$2 launched
  shift 2
  cp "$tree/scripts/pbs/$script" "$work/spool/$id.SC"
  rm -f "$work/status"
  # The subshell waits for the job and keeps bash's report of a job killed by a signal (by
  # qrerun's stand-in, as PBS does) out of the output.
  (
    cd "$work/home" && setsid env PATH="$work/bin:$PATH" TEST_CALLS="$work/calls" \
      PBS_NODEFILE="$work/nodefile" PBS_O_WORKDIR="$tree" PBS_JOBID="$id" \
      PBS_JOBNAME=resnet_ddp PBS_QUEUE=workq NCPUS=2 OMP_NUM_THREADS=2 \
      CUDA_VISIBLE_DEVICES=0,1 DATA="$work" FLAGS="$flags" MPIRUN="${mpiexec[0]}" \
      MPIRUN_FLAGS="${mpiexec[*]:1}" "$@" bash "$work/spool/$id.SC" >"$work/out" 2>&1
    echo $? >"$work/status"
  ) 2>/dev/null &
  launched=$!
  job=''
  for _ in $(seq 100); do
    job=$(pgrep -P "$launched") && break
    sleep 0.05
  done
  [ -n "$job" ] || fail "the job did not start"
}
# end_job SECONDS: waits for the job; sets status.
end_job() {
  local deadline=$((SECONDS + $1))
  until [ -s "$work/status" ]; do
    [ $SECONDS -lt $deadline ] || fail "the job did not end within $1 s"
    sleep 0.2
  done
  status=$(cat "$work/status")
  job=''
}
run_job() { start_job "$@"; end_job 180; }
# newest_step DIR: the global step of the newest checkpoint in DIR.
newest_step() {
  local newest
  newest=$(find "$1" -name 'checkpoint-*.rddp' 2>/dev/null | sort | tail -n 1)
  [ -n "$newest" ] || fail "no checkpoint in $1"
  newest=${newest##*/checkpoint-}
  echo $((10#${newest%.rddp}))
}
# resumed DIR STEP: the job resumed from DIR's checkpoint of STEP and trained 4 more steps.
resumed() {
  expect_out "start +.*$1/checkpoint-0*$2\\.rddp"
  [ -e "$tree/$1/checkpoint-$(printf %010d $(($2 + 4))).rddp" ] ||
    fail "no checkpoint of step $(($2 + 4)) in $1 after 4 more steps"
}

# Too few GPUs for the ranks of a node (mpiprocs=2, ngpus=1): refused before anything starts.
run_job train_one_node.pbs 100.pbs-test CUDA_VISIBLE_DEVICES=0
[ "$status" = 1 ] || fail "2 ranks on 1 GPU: exit status $status, expected 1"
expect_out "PBS_NODEFILE lists 2 ranks on .*, which has 1 GPUs \(CUDA_VISIBLE_DEVICES=0\): ask for one rank per GPU, mpiprocs equal to ngpus \(select=1:ncpus=C:ngpus=1:mpiprocs=1\)"
ok "two ranks a node for one GPU: refused, naming the select that fits"

# The walltime (qstat: 2:15) less TIME_MARGIN's 120 s: the timer checkpoints at 15 s, then qrerun.
run_job train_one_node.pbs 101.pbs-test TEST_WALLTIME=00:02:15
[ "$status" = 137 ] || fail "qrerun should have ended the job (SIGKILL), exit status $status"
expect_out "2 ranks on 1 node\(s\) \(2 each, 1 loader threads each\)"
expect_out "walltime 00:02:15: checkpoint in 1[0-5] s, 120 s before it"
expect_out "SIGUSR1: the walltime is near; asking the ranks to checkpoint"
expect_out "preempted \((SIGUSR1|on another rank)\) at epoch"
expect_out "checkpoint written; asking PBS to run job 101.pbs-test again"
[ "$(cat "$work/calls/qrerun")" = 101.pbs-test ] || fail "qrerun was not asked for job 101.pbs-test"
step=$(newest_step "$tree/checkpoints/resnet_ddp-101") || { echo "$step"; exit 1; }
ok "walltime near: SIGUSR1 through mpirun to both ranks, a checkpoint at step $step, qrerun"
# Run again, as PBS does after qrerun (here for 4 more steps).
run_job train_one_node.pbs 101.pbs-test FLAGS="$flags --max-steps $((step + 4))"
[ "$status" = 0 ] || fail "the rerun job ended with $status"
resumed checkpoints/resnet_ddp-101 "$step"
ok "the rerun job (same id) resumes from its checkpoint of step $step and trains on"

# qdel or preemption: PBS sends SIGTERM to every process of the job's session, and SIGKILL to
# what is left after the server's kill_delay (10 s by default). The ranks have checkpointed by
# then (their output, which Open MPI's mpirun stops forwarding, is not seen).
start_job train_multi_node.pbs 102.pbs-test
for _ in $(seq 600); do grep -q "step 3/" "$work/out" && break; sleep 0.1; done
[ -z "$(find "$tree/checkpoints/resnet_ddp-102" -name 'checkpoint-*.rddp' 2>/dev/null)" ] ||
  fail "a checkpoint before the first epoch's end"
pkill -TERM -s "$job"
sleep 10
pkill -KILL -s "$job"
end_job 60
expect_out "SIGTERM \(qdel or preemption\): the ranks checkpoint to checkpoints/resnet_ddp-102; the job is not run again here: to go on, qsub -v CHECKPOINT_DIR=checkpoints/resnet_ddp-102 scripts/pbs/train_multi_node.pbs"
step=$(newest_step "$tree/checkpoints/resnet_ddp-102") || { echo "$step"; exit 1; }
[ "$step" -ge 3 ] || fail "the checkpoint after SIGTERM is of step $step, before the signal"
if [ "$(wc -l <"$work/calls/qrerun")" != 1 ] || [ -e "$work/calls/qsub" ]; then
  fail "a job stopped by SIGTERM was run again"
fi
ok "SIGTERM to the whole job, SIGKILL 10 s later: the ranks checkpointed (step $step), no rerun"
run_job train_multi_node.pbs 102.pbs-test FLAGS="$flags --max-steps $((step + 4))"
[ "$status" = 0 ] || fail "the job run again after SIGTERM ended with $status"
resumed checkpoints/resnet_ddp-102 "$step"
ok "run again (as PBS requeues a preempted job), it resumes from its checkpoint of step $step"

# qrerun refused to the job's owner: qsub of the same script, resources and checkpoints.
run_job train_multi_node.pbs 104.pbs-test TEST_WALLTIME=2:15 TEST_QRERUN=refuse
[ "$status" = 75 ] || fail "a job submitted again should exit 75, not $status"
expect_out "qrerun: Unauthorized Request  104.pbs-test"
expect_out "qrerun refused \(above\): submitting scripts/pbs/train_multi_node.pbs again to go on from checkpoints/resnet_ddp-104"
expect_out "submitted again as 105.pbs-test"
expected_qsub=(-N resnet_ddp -l "select=1:ncpus=2:ngpus=2:mpiprocs=2" -l walltime=2:15 -l place=excl
  -A my_account -q workq -v "CHECKPOINT_DIR='checkpoints/resnet_ddp-104',DATA='$work',FLAGS='$flags',MPIRUN='${mpiexec[0]}',MPIRUN_FLAGS='${mpiexec[*]:1}'"
  scripts/pbs/train_multi_node.pbs)
[ "$(cat "$work/calls/qsub")" = "$(printf '%s\n' "${expected_qsub[@]}")" ] ||
  fail "qsub's arguments: $(cat "$work/calls/qsub"), expected ${expected_qsub[*]}"
ok "qrerun refused: qsub -N, the select, walltime, place, account, queue and -v CHECKPOINT_DIR"
step=$(newest_step "$tree/checkpoints/resnet_ddp-104") || { echo "$step"; exit 1; }
run_job train_multi_node.pbs 105.pbs-test CHECKPOINT_DIR=checkpoints/resnet_ddp-104 \
  FLAGS="$flags --max-steps $((step + 4))"
[ "$status" = 0 ] || fail "the job submitted again ended with $status"
resumed checkpoints/resnet_ddp-104 "$step"
[ ! -e "$tree/checkpoints/resnet_ddp-105" ] || fail "the job submitted again wrote checkpoints of its own"
ok "the job submitted again resumes from the first job's checkpoints"
echo "$checks passed, 0 failed"
