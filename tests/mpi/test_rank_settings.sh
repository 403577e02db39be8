#!/usr/bin/env bash
# Ranks started with different settings (an MPMD launch, 'mpiexec -n 1 A : -n 1 B', gives each
# part its own flags) are refused on every rank before any work, naming the rank, each setting
# that differs and its value on both ranks: flags, the data each rank opened (its own copy at
# its own path: another pack run, other class names) and the checkpoint each rank resumes.
# Settings that may differ per rank (--num-workers, --save-weights with {rank}) do not stop it.
# An output path one rank cannot write stops every rank, at start too.
#   test_rank_settings.sh MPIEXEC [MPIEXEC FLAGS...] -- RESNET_DDP RESNET_DDP_PACK
set -u
mpiexec=()
while [[ $1 != "--" ]]; do mpiexec+=("$1"); shift; done
bin=$2
pack=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checks=0
fail() { echo "FAILED: $1"; sed 's/^/  | /' "$work/out"; exit 1; }
ok() { checks=$((checks + 1)); echo "ok $checks: $1"; }

train=("$bin" --device cpu --batch-size 8 --limit-train 64 --limit-val 16 --print-every 1 --image-size 16
       --epochs 1)
synthetic=("${train[@]}" --dataset synthetic)

# mpmd "RANK 0 ARGS" "RANK 1 ARGS" [ENV FOR RANK 1...]: the two ranks as two parts of one launch
# (each ARGS word-split; no spaces in paths here). Fails when the job outlives 60 s.
mpmd() {
  local rank0=$1 rank1=$2 start status
  shift 2
  start=$SECONDS
  # shellcheck disable=SC2086
  timeout -k 5 60 "${mpiexec[@]}" -n 1 $rank0 : -n 1 env "$@" $rank1 >"$work/out" 2>&1
  status=$?
  elapsed=$((SECONDS - start))
  [ "$status" != 124 ] && [ "$status" != 137 ] || fail "the job hung: $rank1"
  return $status
}

# refused FLAGS PATTERN: rank 1 given FLAGS on top of rank 0's; both ranks refuse, saying PATTERN.
refused() {
  local flags=$1 pattern=$2
  mpmd "${synthetic[*]}" "${synthetic[*]} $flags" && fail "ranks with different settings trained ($flags)"
  for rank in 0 1; do
    grep -q "\[rank $rank/2 [^]]*\] error: rank 1 (host [^)]*) has settings other than rank 0's at start: $pattern" \
      "$work/out" || fail "rank $rank did not name the difference in $flags"
  done
  grep -q "epoch 1/1" "$work/out" && fail "training started with $flags on rank 1"
  ok "rank 1 with $flags: both ranks refuse at start in ${elapsed} s, naming it"
}
refused "--max-steps 3" "--max-steps: 3 on rank 1, not given on rank 0"
refused "--epochs 2" "--epochs: 2 on rank 1, 1 on rank 0"
refused "--seed 3" "--seed: 3 on rank 1, not given on rank 0"
refused "--label-smoothing 0.1" "--label-smoothing: 0.1 on rank 1, not given on rank 0"
refused "--batch-size 4" "--batch-size: 4 on rank 1, 8 on rank 0"
refused "--limit-val 8" "--limit-val: 8 on rank 1, 16 on rank 0"
refused "--lr 0.002 --nesterov --optimizer sgd" \
  "--lr: 0.002 on rank 1, not given on rank 0; --nesterov: given on rank 1, not given on rank 0; --optimizer: sgd on rank 1, not given on rank 0"

# What may differ: loader threads, and where each rank writes its own weights. A number given
# in another spelling is the same number.
mpmd "${synthetic[*]} --lr 0.001 --save-weights $work/w-{rank}.rddp" \
  "${synthetic[*]} --lr 1e-3 --num-workers 1 --print-every 3 --save-weights $work/w-{rank}.rddp" ||
  fail "ranks that differ in --num-workers, --print-every and the spelling of --lr were refused"
cmp -s "$work/w-0.rddp" "$work/w-1.rddp" || fail "the ranks end with different weights"
ok "--num-workers, --print-every and '--lr 1e-3' against '0.001' may differ: trained, the same weights"

# An output that one rank alone cannot write (its own {rank} weights file, in a directory that
# is missing) stops both ranks before any work.
mkdir -p "$work/out-0"
"${mpiexec[@]}" -n 2 "${synthetic[@]}" --save-weights "$work/out-{rank}/w.rddp" >"$work/out" 2>&1 &&
  fail "a rank that cannot write its weights trained"
grep -q "\[rank 1/2 [^]]*\] error: --save-weights: cannot write '$work/out-1/w.rddp': .*does not exist" "$work/out" ||
  fail "rank 1 did not say why"
grep -q "\[rank 0/2 [^]]*\] error: rank 1 (host [^)]*) refuses: --save-weights: cannot write '$work/out-1/w.rddp'" \
  "$work/out" || fail "rank 0 did not pass on rank 1's reason"
grep -q "step 1/" "$work/out" && fail "training started"
ok "rank 1's weights directory is missing: both ranks refuse at start, rank 0 naming rank 1's reason"

# A PPM image of random pixels.
ppm() {
  mkdir -p "$(dirname "$1")"
  { printf 'P6\n%d %d\n255\n' 20 20; head -c 1200 /dev/urandom; } >"$1"
}
for classes in "ant bee" "ant cow"; do
  folder="$work/folder-${classes// /-}"
  for class in $classes; do
    for i in 1 2 3 4 5 6 7 8; do ppm "$folder/train/$class/$i.ppm"; done
    ppm "$folder/val/$class/v.ppm"
  done
done
for run in a b; do
  "$pack" "$work/folder-ant-bee" "$work/pack-$run" --size 20 >"$work/out" 2>&1 || fail "resnet_ddp_pack failed"
done
"$pack" "$work/folder-ant-cow" "$work/pack-cow" --size 20 >"$work/out" 2>&1 || fail "resnet_ddp_pack failed"
packed=("${train[@]}" --limit-val 2)
mpmd "${packed[*]} --data $work/pack-a" "${packed[*]} --data $work/pack-b" &&
  fail "ranks reading packs of two runs trained"
for rank in 0 1; do
  grep -q "\[rank $rank/2 [^]]*\] error: rank 1 (host [^)]*) has settings other than rank 0's once the data is open: pack run id: [0-9a-f]\{16\} on rank 1, [0-9a-f]\{16\} on rank 0\." \
    "$work/out" || fail "rank $rank did not name the pack runs"
done
ok "each rank's own copy of the data, packed by two runs: both ranks refuse, naming the pack run ids"
mpmd "${packed[*]} --data $work/pack-a" "${packed[*]} --data $work/pack-cow" &&
  fail "ranks reading packs of other classes trained"
grep -q "error: rank 1 (host [^)]*) has settings other than rank 0's once the data is open: class names: ant,cow on rank 1, ant,bee on rank 0; pack run id" \
  "$work/out" || fail "the class names that differ are not named"
ok "packs of other class names: refused, naming both lists"
mpmd "${packed[*]} --data $work/pack-a" "${packed[*]} --data $work/pack-a-copy" &&
  fail "a rank whose data is missing trained"
grep -q "error: rank 1 (host [^)]*) has settings other than rank 0's at start: data kind: none: .*pack-a-copy.* on rank 1, packed on rank 0" \
  "$work/out" || fail "a rank without the data does not say so"
ok "a rank that lacks the data: both ranks refuse, naming the path"

# Checkpoints in a directory of each node's own (the same relative --checkpoint-dir, another
# working directory): rank 1 finds none, so it would start over while rank 0 resumes.
mkdir -p "$work/node0" "$work/node1"
(cd "$work/node0" && "${mpiexec[@]}" -n 2 "${synthetic[@]}" --checkpoint-dir ck >"$work/out" 2>&1) ||
  fail "the first run did not train"
mpmd "env -C $work/node0 ${synthetic[*]} --epochs 2 --checkpoint-dir ck --resume" \
  "${synthetic[*]} --epochs 2 --checkpoint-dir ck --resume" -C "$work/node1" &&
  fail "ranks resuming from different checkpoints trained"
for rank in 0 1; do
  grep -q "\[rank $rank/2 [^]]*\] error: rank 1 (host [^)]*) has settings other than rank 0's on --resume: checkpoint resumed from: none (no checkpoint in the directory yet) on rank 1, ck/checkpoint-0000000004.rddp at global step 4 on rank 0" \
    "$work/out" || fail "rank $rank did not name the checkpoints resumed"
done
ok "a node-local checkpoint directory that rank 1 finds empty: both ranks refuse, naming what each resumes"
echo "$checks passed, 0 failed"
