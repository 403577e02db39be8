# shellcheck shell=bash
# Sourced by scripts/slurm/requeue.sh and scripts/pbs/requeue.sh.
# wait_step PID: waits for the training step PID and returns its status. The job script's
# signal traps set `signalled=1` (the caller's variable); a trapped signal ends a `wait` early,
# so it waits again until the step itself has ended (bash keeps the status of an ended step).
wait_step() {
  local status
  while :; do
    signalled=0
    wait "$1"
    status=$?
    [ "$signalled" = 1 ] || return "$status"
  done
}
