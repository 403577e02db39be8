#!/usr/bin/env bash
# With --kill-on-bad-exit=1, one task failing ends the whole step at once, with a non-zero
# status, instead of leaving its peers running or blocked.
# shellcheck source=tests/slurm/slurm_test_lib.sh
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin kill_on_bad_exit
hello=${RDDP_MPI_HELLO:?RDDP_MPI_HELLO must name the mpi_hello program}

# Task 1 fails while task 0 would sleep for five minutes.
# shellcheck disable=SC2016 # the task's shell expands $SLURM_PROCID
run_srun 2 --kill-on-bad-exit=1 --mpi=none -- \
  sh -c 'if [ "$SLURM_PROCID" = 1 ]; then exit 3; fi; exec sleep 300'
expect_failure
expect_seconds_below 20
expect_lines 1 'task 1: Exited with exit code 3'

# An MPI rank exits without MPI_Finalize while the other waits in a barrier forever.
run_srun 2 --kill-on-bad-exit=1 -- "$hello" --exit-on-rank 1 3
expect_failure
expect_seconds_below 20
expect_lines 1 'task 1: Exited with exit code 3'
pass
