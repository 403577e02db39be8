#!/usr/bin/env bash
# Bytes the gradient allreduce puts on the wire per training step, fp32 against bf16, measured
# by Open MPI's monitoring component (pml/coll "monitoring": it counts every byte each rank
# sends, collectives included) on the CPU engine:
#
#   bench/mpi_allreduce_bytes.sh [RESNET_DDP] [RANKS]     (defaults build/resnet_ddp, 2)
#
# Each type trains 1 step and then 3 steps on synthetic data; the difference of the bytes sent
# in all-to-all collectives (allreduces) over the 2 extra steps is what a step sends, free of
# the start-up broadcasts. Per step it is the gradient buckets plus a few bytes of metrics.
# Needs Open MPI 4 or later (ompi_info lists "MCA pml: monitoring").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/resnet_ddp}
ranks=${2:-2}
[ -x "$bin" ] || { echo "mpi_allreduce_bytes.sh: $bin is not built (cmake --build build --target resnet_ddp)" >&2; exit 2; }
ompi_info 2>/dev/null | grep -q "MCA pml: monitoring" ||
  { echo "SKIPPED: mpi_allreduce_bytes.sh: this MPI has no Open MPI monitoring component"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=PASSIVE OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# allreduce_bytes TYPE STEPS: bytes all ranks sent in all-to-all collectives.
allreduce_bytes() {
  local prefix=$work/$1-$2
  mpiexec -n "$ranks" --oversubscribe --mca pml_monitoring_enable 2 --mca pml_monitoring_enable_output 3 \
    --mca pml_monitoring_filename "$prefix" \
    "$bin" --dataset synthetic --device cpu --batch-size 8 --limit-train 64 --limit-val 8 --epochs 1 \
    --max-steps "$2" --grad-allreduce "$1" >"$prefix.out" 2>&1 ||
    { echo "mpi_allreduce_bytes.sh: the $1 run failed:" >&2; cat "$prefix.out" >&2; exit 1; }
  awk '$1 == "A2A" { sum += $3 } END { printf "%d\n", sum }' "$prefix".*.prof
}

echo "resnet_ddp, CPU engine, $ranks ranks, synthetic 32x32 data (cifar stem), batch 8 per rank"
declare -A per_step
for type in fp32 bf16; do
  one=$(allreduce_bytes "$type" 1)
  three=$(allreduce_bytes "$type" 3)
  per_step[$type]=$(((three - one) / 2))
  [ "$type" = fp32 ] && grep -m1 "^  model" "$work/$type-3.out"
  awk -v type="$type" -v one="$one" -v three="$three" -v step="${per_step[$type]}" -v ranks="$ranks" 'BEGIN {
    printf "%s: %d bytes sent by all ranks after 1 step, %d after 3: %d per step (%.2f MB per rank)\n",
           type, one, three, step, step / ranks / 1e6 }'
done
awk -v a="${per_step[bf16]}" -v b="${per_step[fp32]}" 'BEGIN { printf "bf16 / fp32 bytes per step: %.4f\n", a / b }'
