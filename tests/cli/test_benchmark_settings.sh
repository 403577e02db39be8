#!/usr/bin/env bash
# The settings of the Slurm benchmark jobs (scripts/slurm/benchmark_runs.sh, benchmark_setup),
# without Slurm: the precisions chosen for the GPU nvidia-smi reports (bf16 only from compute
# capability 8.0; fp16 instead on a V100, and the output says so), the defaults, the refusals
# of settings that would measure nothing or the wrong thing, and the benchmark.json the table
# is made from. The slurm test slurm.benchmark_scaling runs whole jobs.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIPPED: no python3"; exit 77; }
tree=$work/tree
mkdir -p "$tree/build" "$tree/bin"
ln -s "$RDDP_BIN" "$tree/build/resnet_ddp"
ln -s "$RDDP_SOURCE_DIR/scripts" "$tree/scripts"
printf '#!/bin/sh\necho node1\n' >"$tree/bin/scontrol"
chmod +x "$tree/bin/scontrol"

# gpu NAME_DRIVER_CC: nvidia-smi answers with this line for each of two GPUs; "old NAME, DRIVER"
# is a driver that does not know compute_cap; "none" removes nvidia-smi.
gpu() {
  rm -f "$tree/bin/nvidia-smi"
  case $1 in
    none) return ;;
    old\ *)
      printf '#!/bin/sh\ncase "$*" in *compute_cap*) echo "Field \\"compute_cap\\" is not a valid field to query." >&2; exit 2;; esac\necho "%s"\n' \
        "${1#old }" >"$tree/bin/nvidia-smi" ;;
    *) printf '#!/bin/sh\necho "%s"\necho "%s"\n' "$1" "$1" >"$tree/bin/nvidia-smi" ;;
  esac
  chmod +x "$tree/bin/nvidia-smi"
}
# setup MOST_GPUS [VAR=VALUE...]: benchmark_setup in a job of that many GPUs, the variables it
# sets printed after its own output.
setup() {
  local most=$1
  shift
  (cd "$tree" && env -u DATA -u PRECISIONS -u FLAGS -u PYTORCH_FLAGS -u BATCH -u IMAGE_SIZE \
     -u STEPS -u WINDOW -u WARMUP_STEPS -u PYTORCH -u PYTHON PATH="$tree/bin:$PATH" \
     SLURM_JOB_NAME=bench SLURM_JOB_ID=7 SLURM_JOB_NODELIST=node1 PYTORCH=off "$@" bash -c '
    source scripts/slurm/benchmark_runs.sh
    benchmark_setup "$0"
    echo "precisions: ${precisions[*]}; batch $BATCH; size $IMAGE_SIZE; pytorch flags [$PYTORCH_FLAGS]"
    echo "MASTER $MASTER_ADDR:$MASTER_PORT"' "$most")
}

gpu "Tesla V100-SXM2-32GB, 535.104.05, 7.0"
expect 0 "^precisions: fp16; batch 128; size 32; pytorch flags \[--channels-last\]$" -- setup 8
check "the V100 output says bf16 was left out, and why" grep -qF \
  "the Tesla V100-SXM2-32GB has compute capability 7.0; bf16 needs 8.0 or later: fp16 measured instead" \
  "$tree/benchmark-bench-7/benchmark.json"
check "PyTorch's ranks meet at the job's first node, on a port of the job's own" \
  grep -qx "MASTER node1:20007" "$work/out"
expect 1 "PRECISIONS='bf16': none of them runs on the Tesla V100-SXM2-32GB; try PRECISIONS=fp16" -- \
  setup 8 PRECISIONS=bf16
expect 0 "^precisions: fp16 fp32; " -- setup 8 "PRECISIONS=bf16 fp16 fp32"
gpu "NVIDIA A100-SXM4-80GB, 550.54.15, 8.0"
expect 0 "^precisions: bf16; batch 128;" -- setup 8
check "no precision left out on an A100" grep -q '"skipped": \[\]' "$tree/benchmark-bench-7/benchmark.json"
gpu "old NVIDIA H100 80GB HBM3, 470.82.01"
expect 0 "GPU NVIDIA H100 80GB HBM3 \(compute capability unknown, driver 470.82.01\); precisions bf16$" -- setup 8
gpu none
expect 0 "GPU no nvidia-smi on [^ ]+ \(compute capability unknown, driver unknown\); precisions tf32$" -- \
  setup 8 PRECISIONS=tf32
expect 1 "PRECISIONS: 'int8' is not one of auto, bf16, fp16, tf32, fp32" -- setup 8 PRECISIONS=int8

# Synthetic data holds 1024 images: the default batch halves until every GPU gets a whole one.
expect 0 "^precisions: tf32; batch 64; size 32;" -- setup 16 PRECISIONS=tf32
expect 1 "BATCH=1024 on 2 GPUs is more than the 1024 synthetic images: every step would be a smaller batch. Set BATCH=512 or less, or DATA=/path/to/imagenet" -- \
  setup 2 PRECISIONS=tf32 BATCH=1024
expect 0 "^precisions: tf32; batch 256; size 224; pytorch flags \[\]$" -- \
  setup 64 PRECISIONS=tf32 DATA="$work" FLAGS=
expect 1 "DATA=$work/missing: no such file or directory on .*; unset DATA for synthetic images" -- \
  setup 8 DATA="$work/missing"
expect 1 "STEPS=30 leaves no window of WINDOW=20 steps after the WARMUP_STEPS=20 left out: raise STEPS" -- \
  setup 8 STEPS=30
expect 1 "WINDOW must be a whole number above 0, not 'x'" -- setup 8 WINDOW=x

# benchmark.json: JSON even for flags with quotes and backslashes, and what the table names.
gpu "NVIDIA H100 80GB HBM3, 550.54.15, 9.0"
expect 0 "^precisions: bf16 tf32;" -- setup 8 "PRECISIONS=bf16 tf32" "FLAGS=--a \"b\" c\\d" \
  STEPS=100 WINDOW=10 WARMUP_STEPS=30 PYTORCH_FLAGS=--x
check "benchmark.json holds the job's settings and environment" python3 - "$tree/benchmark-bench-7" <<'EOF'
import json, os, re, sys
s = json.load(open(os.path.join(sys.argv[1], "benchmark.json")))
assert (s["gpu_name"], s["driver"], s["compute_capability"]) == (
    "NVIDIA H100 80GB HBM3", "550.54.15", "9.0"), s
assert s["flags"] == '--a "b" c\\d' and s["pytorch_flags"] == "--x", s
assert (s["steps"], s["steps_per_window"], s["warmup_steps"], s["batch_per_gpu"]) == (100, 10, 30, 128)
assert (s["job_id"], s["job_name"]) == ("7", "bench") and s["skipped"] == []
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s["date"]), s["date"]
assert s["commit"], s
versions = open(os.path.join(sys.argv[1], s["versions_file"])).read()
assert versions.startswith("resnet_ddp ") and "cuDNN" in versions, versions
EOF
finish
