# shellcheck shell=bash
# Sourced by the slurm tests: brings the local Slurm up when it is down (and down again at
# exit, so the machine is left as it was found), runs steps with srun and jobs with sbatch,
# and keeps their output, exit status and duration for the checks.
#
# A test is a script that sources this file, calls `slurm_test_begin NAME`, then uses
# run_srun or submit_job, the waits and the expect_* checks, and ends with `pass`. Without
# root or without Slurm's packages it prints SKIPPED and exits 77, unless
# RDDP_REQUIRE_SLURM=1 (CI), where that is a failure.
# Environment from CTest: RDDP_SOURCE_DIR, RDDP_BUILD_DIR.

set -uo pipefail

source_dir=${RDDP_SOURCE_DIR:?RDDP_SOURCE_DIR must name the source tree}
build_dir=${RDDP_BUILD_DIR:?RDDP_BUILD_DIR must name the build tree}
local_slurm=$source_dir/scripts/local_slurm.sh
test_name=slurm
started_slurm=0
submitted_jobs=()

say() { echo "$test_name: $*"; }

fail() {
  echo "FAILED: $test_name: $*" >&2
  exit 1
}

pass() {
  say "passed"
  exit 0
}

skip() {
  if [ "${RDDP_REQUIRE_SLURM:-0}" = 1 ]; then
    fail "Slurm is required (RDDP_REQUIRE_SLURM=1) but: $*"
  fi
  echo "SKIPPED: $test_name: $*"
  exit 77
}

# At exit, whether the test passed or not: no job of ours is left behind, and Slurm is down
# again if it was down before.
clean_up() {
  if [ ${#submitted_jobs[@]} -gt 0 ]; then
    scancel "${submitted_jobs[@]}" 2>/dev/null
  fi
  if [ $started_slurm = 1 ]; then
    "$local_slurm" stop || echo "$test_name: could not stop the local Slurm" >&2
  fi
}

slurm_test_begin() {
  test_name=slurm.$1
  trap clean_up EXIT
  if ! "$local_slurm" status >/dev/null 2>&1; then
    local reason
    reason=$("$local_slurm" check) || skip "$reason"
    started_slurm=1
    "$local_slurm" start || fail "the local Slurm did not start (output above)"
  fi
  eval "$("$local_slurm" env)"
  work_dir="$build_dir/tests/slurm/tmp/$1"
  rm -rf "$work_dir"
  mkdir -p "$work_dir"
}

# run_srun NTASKS [srun options...] -- PROGRAM [ARGS...]
# Runs one step of NTASKS tasks from $work_dir. Sets srun_status, srun_seconds and srun_log
# (stdout and stderr of srun and of every task). A step that outlives RDDP_SRUN_TIMEOUT
# seconds (default 120) is killed and fails the test.
run_srun() {
  local ntasks=$1
  shift
  local options=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    options+=("$1")
    shift
  done
  [ "${1:-}" = -- ] || fail "run_srun: no -- before the program"
  shift
  local limit=${RDDP_SRUN_TIMEOUT:-120}
  srun_log=$work_dir/srun.$((++srun_count)).log
  say "srun -n $ntasks ${options[*]} $*"
  local began=$SECONDS
  (cd "$work_dir" && timeout -k 10 "$limit" srun --ntasks="$ntasks" "${options[@]}" "$@") \
    >"$srun_log" 2>&1 </dev/null
  srun_status=$?
  srun_seconds=$((SECONDS - began))
  sed 's/^/  | /' "$srun_log"
  say "exit status $srun_status after $srun_seconds s"
  if [ $srun_status = 124 ] || [ $srun_status = 137 ]; then
    fail "the step did not end within ${limit} s"
  fi
}
srun_count=0

expect_status() {
  [ "$srun_status" = "$1" ] || fail "srun exited with $srun_status, expected $1"
}

expect_failure() {
  [ "$srun_status" != 0 ] || fail "srun exited with 0, expected a failure"
}

# expect_lines COUNT REGEX: exactly COUNT lines of the last step's output match REGEX.
expect_lines() { expect_file_lines "$1" "$2" "$srun_log"; }

expect_seconds_below() {
  [ "$srun_seconds" -lt "$1" ] || fail "the step took $srun_seconds s, expected under $1 s"
}

# submit_job DIR [sbatch options...] SCRIPT: submits from DIR; sets job and job_out (the
# job's output file, as the scripts name it: <job name>-<job id>.out).
submit_job() {
  local dir=$1
  shift
  job=$(cd "$dir" && sbatch --parsable "$@") || fail "sbatch refused: $*"
  submitted_jobs+=("$job")
  job_out=$dir/$(job_field "$job" JobName)-$job.out
  say "sbatch $* submitted job $job"
}

show_job_output() { sed 's/^/  | /' "$job_out"; }

expect_job_state() {
  local state
  state=$(job_field "$job" JobState)
  [ "$state" = "$1" ] || fail "job $job ended $state, expected $1"
}

# A field of `scontrol show job` (JobState, Restarts, ExitCode...); Slurm keeps a finished
# job's record for MinJobAge (300 s by default).
job_field() {
  scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_for_job_end JOB SECONDS: waits until the job has left the queue for good (a requeued
# one has run again).
wait_for_job_end() {
  local deadline=$((SECONDS + $2)) state
  while :; do
    state=$(job_field "$1" JobState)
    case $state in
      PENDING | RUNNING | COMPLETING | CONFIGURING | REQUEUED | "") ;;
      *) return 0 ;;
    esac
    [ $SECONDS -lt $deadline ] || fail "job $1 still $state after $2 s"
    sleep 0.5
  done
}

# wait_for_files SECONDS FILE...: waits until every FILE exists.
wait_for_files() {
  local deadline=$((SECONDS + $1)) file
  shift
  for file in "$@"; do
    until [ -e "$file" ]; do
      [ $SECONDS -lt $deadline ] || fail "$file did not appear within the time allowed"
      sleep 0.2
    done
  done
}

# expect_file_lines COUNT REGEX FILE: exactly COUNT lines of FILE match REGEX.
expect_file_lines() {
  local found
  found=$(grep -c -E -- "$2" "$3")
  [ "$found" = "$1" ] || fail "expected $1 line(s) of $3 matching '$2', found $found"
}
