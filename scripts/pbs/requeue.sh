# shellcheck shell=bash
# Sourced by the PBS job scripts: run_requeueable runs the training step and, when the job's
# walltime is running out, checkpoints and has PBS run the job again from its checkpoint.
#
# The contract with resnet_ddp is that of scripts/slurm/requeue.sh: on SIGUSR1 or SIGTERM every
# rank finishes its step, rank 0 writes a checkpoint and every rank exits with status 75;
# started again with --resume and the same --checkpoint-dir, it goes on from there.
#
# PBS gives no warning before the walltime (at the limit it sends SIGTERM, then SIGKILL after
# the server's kill_delay), so the script keeps its own time: TIME_MARGIN seconds (default 120)
# before the job's Resource_List.walltime (qstat -f), it sends SIGUSR1 to mpirun, which passes
# it to every rank (Open MPI's mpirun forwards SIGUSR1). When they exit 75 after it, the job is
# run again:
#   - qrerun: the job goes back to the queue with its id and resources, and finds its
#     checkpoint directory again (the job must be rerunnable, #PBS -r y);
#   - where PBS refuses qrerun to the job's owner (some sites keep it to operators): qsub of the
#     same script with the job's select, walltime, place, queue and account, and
#     CHECKPOINT_DIR naming the checkpoint directory.
# On qdel or preemption PBS sends SIGTERM to every process of the job: the ranks checkpoint all
# the same (within kill_delay, after which PBS kills what is left, mpirun too), but the job is
# not run again here: a deleted job must end, and PBS requeues a job it preempts that way itself.
source "$(dirname "${BASH_SOURCE[0]}")/../wait_step.sh"

# The job's attribute NAME from qstat -f (PBS continues a long value on lines starting with a
# tab), or nothing.
job_attribute() {
  qstat -f "$PBS_JOBID" 2>/dev/null |
    awk -v name="$1" '/^\t/ { value = value substr($0, 2); next }
                      { if (found) exit; value = "" }
                      $1 == name && $2 == "=" { found = 1; sub(/^[^=]*= /, ""); value = $0 }
                      END { if (found) print value }'
}

# [[HH:]MM:]SS as seconds.
to_seconds() {
  local total=0 part parts
  IFS=: read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    [[ $part =~ ^[0-9]+$ ]] || return 1
    total=$((total * 60 + 10#$part))
  done
  echo "$total"
}

# Sends this shell SIGUSR1 TIME_MARGIN seconds before the walltime; sets timer.
start_walltime_timer() {
  local limit seconds delay margin=${TIME_MARGIN:-120}
  timer=''
  limit=$(job_attribute Resource_List.walltime)
  if [ -z "$limit" ] || ! seconds=$(to_seconds "$limit"); then
    say "no walltime for job $PBS_JOBID (qstat -f): no checkpoint before the time limit"
    return
  fi
  delay=$((seconds - margin - SECONDS))
  if [ "$delay" -le 0 ]; then
    say "walltime $limit leaves less than TIME_MARGIN=$margin s: no checkpoint before it"
    return
  fi
  say "walltime $limit: checkpoint in $delay s, $margin s before it"
  (
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep "$delay" >/dev/null 2>&1 &
    sleeper=$!
    wait "$sleeper" && kill -USR1 $$
  ) &
  timer=$!
}

# run_again SCRIPT CHECKPOINTS: the job again, from its checkpoint, for the rest of the training.
run_again() {
  local script=$1 checkpoints=$2
  say "checkpoint written; asking PBS to run job $PBS_JOBID again"
  if qrerun "$PBS_JOBID"; then
    say "qrerun accepted: PBS ends this run and queues the job again"
    sleep 60
    return 75
  fi
  say "qrerun refused (above): submitting $script again to go on from $checkpoints"
  local args=(-N "$PBS_JOBNAME") value resource variables="CHECKPOINT_DIR='$checkpoints'" name
  for resource in select walltime place; do
    value=$(job_attribute "Resource_List.$resource")
    [ -z "$value" ] || args+=(-l "$resource=$value")
  done
  value=$(job_attribute Account_Name)
  [ -z "$value" ] || args+=(-A "$value")
  [ -z "${PBS_QUEUE:-}" ] || args+=(-q "$PBS_QUEUE")
  for name in DATA FLAGS TIME_MARGIN MPIRUN MPIRUN_FLAGS; do
    [ -z "${!name+set}" ] || variables+=",$name='${!name}'"
  done
  if value=$(cd "$PBS_O_WORKDIR" && qsub "${args[@]}" -v "$variables" "$script"); then
    say "submitted again as $value"
  else
    say "qsub refused (above): submit by hand to go on: qsub -v CHECKPOINT_DIR=$checkpoints $script"
  fi
  return 75
}

# run_requeueable SCRIPT CHECKPOINTS COMMAND [ARGS...]: runs the command (mpirun ...); SCRIPT is
# the job script's path in the source tree and CHECKPOINTS the --checkpoint-dir, for running the
# job again. Returns the command's status.
run_requeueable() {
  local script=$1 checkpoints=$2
  shift 2
  "$@" &
  local step=$! status signalled time_running_out=0 terminated=0 timer
  # The command runs in the background because bash delays a trapped signal until the
  # foreground command ends, while `wait` returns as soon as a signal arrives.
  trap 'signalled=1; time_running_out=1; kill -USR1 $step 2>/dev/null
        say "SIGUSR1: the walltime is near; asking the ranks to checkpoint"' USR1
  trap 'signalled=1; terminated=1
        say "SIGTERM (qdel or preemption): the ranks checkpoint to $checkpoints; the job is not" \
          "run again here: to go on, qsub -v CHECKPOINT_DIR=$checkpoints $script"' TERM
  start_walltime_timer
  wait_step "$step"
  status=$?
  [ -z "$timer" ] || kill "$timer" 2>/dev/null
  trap - USR1 TERM
  if [ "$status" -eq 75 ] && [ $time_running_out = 1 ] && [ $terminated = 0 ]; then
    run_again "$script" "$checkpoints"
    return
  fi
  return "$status"
}
