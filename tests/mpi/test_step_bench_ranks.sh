#!/usr/bin/env bash
# The throughput benchmark on two ranks, one GPU each: both finish, and rank 0's JSON record
# counts both ranks' images, reports the communication the step left exposed, and names the
# gradient allreduce it measured (float32, then bfloat16).
#   test_step_bench_ranks.sh MPIEXEC [MPIEXEC FLAGS...] -- CUDA_STEP_BENCH
set -u
mpiexec=()
while [[ $1 != "--" ]]; do mpiexec+=("$1"); shift; done
bench=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
checks=0
fail() { echo "FAILED: $1"; sed 's/^/  | /' "$out"; exit 1; }

# field NAME: the value of "NAME": in the JSON record (numbers, strings without quotes, true).
field() { grep '^{"record":"throughput"' "$out" | grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2 | tr -d '"'; }
# split_part NAME: the value of NAME in the record's split_ms.
split_part() { grep '^{"record":"throughput"' "$out" | grep -o '"split_ms":{[^}]*}' | grep -o "\"$1\":[^,}]*" | cut -d: -f2; }

for allreduce in fp32 bf16; do
  "${mpiexec[@]}" -n 2 "$bench" --size 16 --batch 4 --classes 10 --warmup 1 --windows 2 --steps-per-window 1 \
    --grad-allreduce "$allreduce" >"$out" 2>&1 || fail "the benchmark failed on two ranks ($allreduce)"
  [ "$(grep -c '^{"record":"throughput"' "$out")" = 1 ] || fail "expected one JSON record, from rank 0"
  [ "$(field status)" = ok ] && [ "$(field world_size)" = 2 ] && [ "$(field ddp)" = true ] ||
    fail "the record does not say status ok, world_size 2, ddp true"
  [ "$(field grad_allreduce)" = "$allreduce" ] || fail "the record names $(field grad_allreduce), not $allreduce"
  per_gpu=$(field images_per_s_per_gpu)
  total=$(field images_per_s_total)
  awk -v g="$per_gpu" -v t="$total" 'BEGIN { exit !(g > 0 && t > 1.99 * g && t < 2.01 * g) }' ||
    fail "the total ($total images/s) is not both ranks' images ($per_gpu per GPU)"
  grep -q '"comm_exposed":[0-9.e+-]*' "$out" || fail "no exposed communication in the step's split"
  grep -q "exposed communication" "$out" || fail "the table has no exposed communication"
  checks=$((checks + 1))
  echo "ok $checks: --grad-allreduce $allreduce: 2 ranks, $total images/s in total, $per_gpu per GPU"
done
# --cuda-graphs on: the reducer's allreduces are captured with the step and replayed.
"${mpiexec[@]}" -n 2 "$bench" --size 16 --batch 4 --classes 10 --warmup 4 --windows 2 --steps-per-window 1 \
  --cuda-graphs on >"$out" 2>&1 || fail "the benchmark failed on two ranks with --cuda-graphs on"
[ "$(field status)" = ok ] && [ "$(field ddp)" = true ] && [ "$(field cuda_graphs)" = true ] ||
  fail "the record does not say status ok, ddp true, cuda_graphs true"
[ "$(field graph_replays)" = 3 ] || fail "expected 3 replays (6 steps less 3 warm-up), got $(field graph_replays)"
# The split's events before the optimizer are nodes of the graph, captured with the allreduces.
for part in forward_backward comm_exposed optimizer; do
  awk -v v="$(split_part "$part")" 'BEGIN { exit !(v ~ /^[0-9.e+-]+$/ && v >= 0) }' ||
    fail "the replayed step's $part is not measured: '$(split_part "$part")'"
done
awk -v f="$(split_part forward_backward)" -v o="$(split_part optimizer)" 'BEGIN { exit !(f > 0 && o > 0) }' ||
  fail "a replayed step's forward+backward or optimizer took no time"
checks=$((checks + 1))
echo "ok $checks: --cuda-graphs on: 2 ranks replay the step with its allreduces, split by events in the graph"
# Our fastest flags: fused BatchNorm in NHWC, replayed with the allreduces on two ranks.
"${mpiexec[@]}" -n 2 "$bench" --size 16 --batch 4 --classes 10 --warmup 4 --windows 2 --steps-per-window 1 \
  --memory-format nhwc --batchnorm fused --cuda-graphs on >"$out" 2>&1 ||
  fail "the benchmark failed on two ranks with --memory-format nhwc --batchnorm fused --cuda-graphs on"
[ "$(field status)" = ok ] && [ "$(field ddp)" = true ] && [ "$(field memory_format)" = nhwc ] ||
  fail "the record does not say status ok, ddp true, memory_format nhwc"
[ "$(field impl)" = resnet_ddp-fusedbn-graphs ] || fail "the record is named $(field impl)"
[ "$(field graph_replays)" = 3 ] || fail "expected 3 replays of the fused NHWC step, got $(field graph_replays)"
checks=$((checks + 1))
echo "ok $checks: fused BatchNorm in NHWC: 2 ranks replay the step with its allreduces"
echo "$checks passed, 0 failed"
