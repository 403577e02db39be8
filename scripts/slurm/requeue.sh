# shellcheck shell=bash
# Sourced by the job scripts: run_requeueable runs the training step and, when the program
# stopped early because the job's time is running out, puts the job back in the queue to go
# on from its checkpoint.
#
# The contract with resnet_ddp:
#   - on SIGUSR1 or SIGTERM every rank finishes its current step, the ranks agree to stop,
#     rank 0 writes the checkpoint (to a temporary file, then renamed) and, once it is
#     written, every rank exits with status 75 (EX_TEMPFAIL: "stopped, try again"). A second
#     signal changes nothing, and no rank dies of one, so that srun's status stays 75;
#   - started again with --resume and the same --checkpoint-dir, it goes on from the newest
#     checkpoint there (and starts from the beginning when there is none yet);
#   - any other non-zero status is a real failure: no requeue.
# Slurm sends SIGUSR1 to this shell (--signal=B:USR1@120) before the time limit: this shell
# passes it to srun, which passes it to every rank, and requeues the job when they exit 75.
# On scancel, preemption or a node shutdown Slurm sends SIGTERM to the ranks itself: they
# checkpoint all the same, but the job is not requeued here: a user's scancel must end it,
# and a cluster that requeues preempted jobs does so itself.
# The checkpoint must be written within the SIGUSR1 lead time (120 s, which Slurm may shorten
# by up to 60 s) and, after a SIGTERM, within the cluster's KillWait (often 30 s).
source "$(dirname "${BASH_SOURCE[0]}")/../wait_step.sh"

# run_requeueable COMMAND [ARGS...]: returns the command's status.
run_requeueable() {
  "$@" &
  local step=$! status signalled time_running_out=0
  # The command runs in the background because bash delays a trapped signal until the
  # foreground command ends, while `wait` returns as soon as a signal arrives.
  trap 'signalled=1; time_running_out=1; kill -USR1 $step 2>/dev/null
        echo "$(date +%T) SIGUSR1: the time limit is near; asking the ranks to checkpoint"' USR1
  trap 'signalled=1; echo "$(date +%T) SIGTERM: waiting for the ranks to checkpoint"' TERM
  wait_step "$step"
  status=$?
  trap - USR1 TERM
  if [ "$status" -eq 75 ] && [ $time_running_out = 1 ]; then
    echo "$(date +%T) checkpoint written; requeueing job $SLURM_JOB_ID" \
      "(restart $((${SLURM_RESTART_COUNT:-0} + 1)))"
    scontrol requeue "$SLURM_JOB_ID"
  elif [ "$status" -eq 75 ]; then
    echo "$(date +%T) checkpoint written; job not requeued (cancelled or preempted):" \
      "submit it again to go on"
  fi
  return "$status"
}
