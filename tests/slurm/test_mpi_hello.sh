#!/usr/bin/env bash
# srun starts two Open MPI ranks that find each other through PMIx: MPI's world size and ranks
# are Slurm's, and an allreduce reaches both.
# shellcheck source=tests/slurm/slurm_test_lib.sh
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin mpi_hello
hello=${RDDP_MPI_HELLO:?RDDP_MPI_HELLO must name the mpi_hello program}

run_srun 2 --mpi=pmix -- "$hello"
expect_status 0
expect_lines 1 '^rank 0 of 2 on .*: SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=2, allreduce reached 2 ranks$'
expect_lines 1 '^rank 1 of 2 on .*: SLURM_PROCID=1 SLURM_LOCALID=1 SLURM_NTASKS=2, allreduce reached 2 ranks$'

# MpiDefault=pmix: a plain `srun ./program` is enough.
run_srun 2 -- "$hello"
expect_status 0
expect_lines 2 '^rank [01] of 2 on .*allreduce reached 2 ranks$'

# Without PMIx the ranks cannot find each other: the check above is not vacuous.
run_srun 2 --mpi=none -- "$hello"
expect_failure
expect_lines 0 'of 2 on'
pass
