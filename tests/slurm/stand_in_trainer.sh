#!/usr/bin/env bash
# Takes resnet_ddp's place in the job script tests: keeps the program's side of the contract
# in scripts/slurm/requeue.sh without training anything.
#   --max-steps N                   a profile run: report and exit 0
#   --checkpoint-dir DIR --resume   go on from DIR/checkpoint (report, exit 0) when it exists;
#                                   otherwise run until SIGUSR1 or SIGTERM, then rank 0 writes
#                                   it and every rank exits 75 once it is written
# Each rank reports its view of the step, and touches ready.<rank> once it can take signals.
set -u
checkpoint_dir='' resume=0 steps=''
arguments="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --checkpoint-dir) checkpoint_dir=$2; shift ;;
    --resume) resume=1 ;;
    --max-steps) steps=$2; shift ;;
  esac
  shift
done
rank=$SLURM_PROCID
echo "rank $rank of $SLURM_NTASKS: restart ${SLURM_RESTART_COUNT:-0}," \
  "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}, SLURM_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-}," \
  "arguments: $arguments"
if [ -n "$steps" ]; then
  echo "rank $rank: $steps steps done"
  exit 0
fi
checkpoint=$checkpoint_dir/checkpoint
if [ $resume = 1 ] && [ -e "$checkpoint" ]; then
  echo "rank $rank: resumed from $checkpoint"
  exit 0
fi

sleeper=''
stopping=0
stop() {
  [ $stopping = 0 ] || return
  stopping=1
  echo "rank $rank: $1: checkpointing"
  if [ "$rank" = 0 ]; then
    mkdir -p "$checkpoint_dir"
    echo "written by rank 0" >"$checkpoint.tmp" && mv "$checkpoint.tmp" "$checkpoint"
  else
    while [ ! -e "$checkpoint" ]; do sleep 0.1; done
  fi
  kill "$sleeper" 2>/dev/null
  exit 75
}
trap 'stop SIGUSR1' USR1
trap 'stop SIGTERM' TERM
touch "ready.$rank"
# bash runs a trap as soon as a signal arrives during `wait`, not during a foreground sleep.
# The sleep's output goes nowhere, so it holds no pipe of the step open.
while :; do
  sleep 60 >/dev/null 2>&1 &
  sleeper=$!
  wait "$sleeper"
done
