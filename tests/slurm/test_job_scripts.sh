#!/usr/bin/env bash
# The job scripts users submit (scripts/slurm/*.sbatch), run for real by sbatch on two of the
# local node's GPU slots, with a stand-in for resnet_ddp that keeps the program's side of the
# checkpoint contract: one task per GPU with its loader CPUs, the near-time-limit signal that
# checkpoints and requeues, the scancel that checkpoints and ends, the benchmark's runs.
# shellcheck source=tests/slurm/slurm_test_lib.sh
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin job_scripts

# The scripts run from a source tree: a copy of scripts/slurm, and the stand-in as the program.
tree=$work_dir/tree
mkdir -p "$tree/build" "$tree/scripts"
cp -r "$source_dir/scripts/slurm" "$tree/scripts/"
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

# The benchmark: a run on one GPU, then one on both.
submit_job "$tree" --gpus-per-node=2 scripts/slurm/benchmark_throughput.sbatch
wait_for_job_end "$job" 60
show_job_output
expect_job_state COMPLETED
expect_file_lines 1 '^=== 1 of 2 GPUs, 300 steps$' "$job_out"
expect_file_lines 1 '^=== 2 of 2 GPUs, 300 steps$' "$job_out"
expect_file_lines 1 "^rank 0 of 1: .*SLURM_CPUS_PER_TASK=1, arguments: --data $DATA --max-steps 300\$" "$job_out"
expect_file_lines 2 "^rank [01] of 2: .*SLURM_CPUS_PER_TASK=1, arguments: --data $DATA --max-steps 300\$" "$job_out"
expect_file_lines 3 "^rank [01]: benchmark of 300 steps done\$" "$job_out"
pass
