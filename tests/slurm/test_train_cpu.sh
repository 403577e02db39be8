#!/usr/bin/env bash
# resnet_ddp under srun: two CPU ranks train on Fashion-MNIST, rank 0 reports world size 2,
# both ranks end with the same weights, and they equal the same run under mpirun.
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin train_cpu
trainer=${RDDP_RESNET_DDP:?}
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || skip "no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"
run=(--device cpu --data "$data" --limit-train 128 --limit-val 64 --epochs 1 --batch-size 32)
run_srun 2 -- "$trainer" "${run[@]}" --save-weights "srun-{rank}.rddp"
expect_status 0
expect_lines 1 '^  world size +2 ranks$'
cmp "$work_dir/srun-0.rddp" "$work_dir/srun-1.rddp" || fail "the two ranks ended with different weights"
(cd "$work_dir" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe -np 2 "$trainer" "${run[@]}" --save-weights mpirun.rddp) >"$work_dir/mpirun.log" 2>&1 ||
  fail "mpirun failed: $(tail -5 "$work_dir/mpirun.log")"
cmp "$work_dir/srun-0.rddp" "$work_dir/mpirun.rddp" || fail "srun and mpirun trained different weights"
pass
