#!/usr/bin/env bash
# The job scripts users submit (scripts/slurm/*.sbatch), run for real by sbatch on two of the
# local node's GPU slots, with a stand-in for resnet_ddp that keeps the program's side of the
# checkpoint contract: one task per GPU with its loader CPUs, the near-time-limit signal that
# checkpoints and requeues, the scancel that checkpoints and ends, the profile's runs under nsys
# (a stand-in too). The benchmark jobs have their own test (test_benchmark_scaling.sh).
# shellcheck source=tests/slurm/slurm_test_lib.sh
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin job_scripts

# The scripts run from a source tree: a copy of scripts/slurm, and the stand-in as the program.
tree=$work_dir/tree
mkdir -p "$tree/build" "$tree/scripts"
cp -r "$source_dir/scripts/slurm" "$source_dir/scripts/wait_step.sh" "$tree/scripts/"
cp "$source_dir/tests/slurm/stand_in_trainer.sh" "$tree/build/resnet_ddp"
export DATA=/data/for/the/test
# A node of the local Slurm has as many GPU slots as CPUs: the test uses two of each.
[ "$(nproc)" -ge 2 ] || skip "the job scripts test needs 2 CPUs, this machine has $(nproc)"

# One node, its time running out: --signal=B:USR1 signals the batch shell, as scancel --batch.
submit_job "$tree" --gpus-per-node=2 scripts/slurm/train_one_node.sbatch
wait_for_files 60 "$tree/ready.0" "$tree/ready.1"
scancel --signal=USR1 --batch "$job"
wait_for_job_end "$job" 120
show_job_output
expect_job_state COMPLETED
[ "$(job_field "$job" Restarts)" = 1 ] || fail "job $job was not requeued exactly once"
checkpoints=checkpoints/resnet_ddp-$job
for rank in 0 1; do
  expect_file_lines 1 "^rank $rank of 2: restart 0, CUDA_VISIBLE_DEVICES=0,1, SLURM_CPUS_PER_TASK=1, arguments: --data $DATA --checkpoint-dir $checkpoints --resume\$" "$job_out"
  expect_file_lines 1 "^rank $rank: SIGUSR1: checkpointing\$" "$job_out"
  expect_file_lines 1 "^rank $rank of 2: restart 1, " "$job_out"
  expect_file_lines 1 "^rank $rank: resumed from $checkpoints/checkpoint\$" "$job_out"
done
expect_file_lines 1 "checkpoint written; requeueing job $job" "$job_out"

# Several nodes (one here), cancelled: the ranks checkpoint, and the job ends for good.
rm -f "$tree"/ready.*
submit_job "$tree" --gpus-per-node=2 --nodes=1 scripts/slurm/train_multi_node.sbatch
wait_for_files 60 "$tree/ready.0" "$tree/ready.1"
scancel "$job"
wait_for_job_end "$job" 60
show_job_output
expect_job_state CANCELLED
[ "$(job_field "$job" Restarts)" = 0 ] || fail "the cancelled job $job was requeued"
for rank in 0 1; do
  expect_file_lines 1 "^rank $rank: SIGTERM: checkpointing\$" "$job_out"
done
expect_file_lines 1 "checkpoint written; job not requeued" "$job_out"
[ -s "$tree/checkpoints/resnet_ddp-$job/checkpoint" ] || fail "no checkpoint after scancel"

# The profile: every rank under nsys (a stand-in that runs the program, keeps what it printed as
# the report, and summarises a report by naming it), collecting steps 100-110, the run ending
# after the last; rank 0's summaries end the output.
mkdir -p "$tree/bin"
cat >"$tree/bin/nsys" <<'STANDIN'
#!/bin/bash
if [ "$1" = stats ]; then echo "summary $3 of $4: $(head -n 1 "$4")"; exit 0; fi
echo "nsys $*" | head -c 160 >"nsys-options.$SLURM_PROCID"
while [ "$1" != -o ]; do shift; done
name=${2//%q\{SLURM_PROCID\}/$SLURM_PROCID}
shift 2
"$@" | tee "$name.nsys-rep"
STANDIN
chmod +x "$tree/bin/nsys"
NSYS=$tree/bin/nsys submit_job "$tree" --gpus-per-node=2 scripts/slurm/profile.sbatch
wait_for_job_end "$job" 60
show_job_output
expect_job_state COMPLETED
expect_file_lines 2 "^rank [01] of 2: .*SLURM_CPUS_PER_TASK=1, arguments: --data $DATA --profile-steps 100-110 --max-steps 110\$" "$job_out"
for rank in 0 1; do
  grep -q "^rank $rank of 2: " "$tree/profile-$job-rank$rank.nsys-rep" || fail "no report of rank $rank under nsys"
  grep -q -- "--capture-range=cudaProfilerApi --capture-range-end=stop" "$tree/nsys-options.$rank" ||
    fail "rank $rank's nsys does not collect between cudaProfilerStart and Stop"
done
expect_file_lines 1 "^summary cuda_gpu_kern_sum of profile-$job-rank0.nsys-rep: rank 0 of 2" "$job_out"
expect_file_lines 1 "^summary nvtx_gpu_proj_sum of profile-$job-rank0.nsys-rep: rank 0 of 2" "$job_out"
pass
