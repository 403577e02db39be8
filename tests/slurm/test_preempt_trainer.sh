#!/usr/bin/env bash
# Preemption with the real resnet_ddp under the job script users submit: near the time limit
# Slurm signals the job (here: scancel --signal=USR1 --batch, as --signal=B:USR1@120 does),
# every rank stops at the next step, rank 0 checkpoints, the job requeues itself, and the
# requeued run resumes from the checkpoint and finishes its epochs.
# shellcheck source=tests/slurm/slurm_test_lib.sh
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin preempt_trainer
trainer=${RDDP_RESNET_DDP:?}
[ "$(nproc)" -ge 2 ] || skip "the preemption test needs 2 CPUs, this machine has $(nproc)"

# The job script runs build/resnet_ddp from a source tree; here that is the real trainer, on
# the CPU and a small synthetic data set so that the job takes seconds.
tree=$work_dir/tree
mkdir -p "$tree/build" "$tree/scripts"
cp -r "$source_dir/scripts/slurm" "$source_dir/scripts/wait_step.sh" "$tree/scripts/"
cat >"$tree/build/resnet_ddp" <<WRAPPER
#!/bin/bash
export OMP_WAIT_POLICY=PASSIVE
exec "$trainer" "\$@" --dataset synthetic --device cpu --batch-size 8 --limit-train 96 --limit-val 16 \
  --epochs 2 --print-every 1
WRAPPER
chmod +x "$tree/build/resnet_ddp"
export DATA=unused-with-synthetic-data

submit_job "$tree" --gpus-per-node=2 scripts/slurm/train_one_node.sbatch
# Signal once training has begun (rank 0 prints each step).
deadline=$((SECONDS + 120))
until [ -f "$job_out" ] && grep -q "epoch 1/2 step 2/6" "$job_out"; do
  [ $SECONDS -lt $deadline ] || { show_job_output; fail "training did not start within 120 s"; }
  sleep 0.2
done
scancel --signal=USR1 --batch "$job"
wait_for_job_end "$job" 300
show_job_output
expect_job_state COMPLETED
[ "$(job_field "$job" Restarts)" = 1 ] || fail "job $job was not requeued exactly once"
expect_file_lines 1 "preempted \((SIGUSR1|on another rank)\) at epoch 1 step [2-5]" "$job_out"
expect_file_lines 1 "^checkpoint checkpoints/resnet_ddp-$job/checkpoint-000000000[2-5].rddp$" "$job_out"
expect_file_lines 1 "^  start +checkpoints/resnet_ddp-$job/checkpoint-000000000[2-5].rddp \(epoch 1, step [2-5]" "$job_out"
expect_file_lines 1 "^epoch 2/2: train loss" "$job_out"
expect_file_lines 1 "^final validation accuracy" "$job_out"
pass
