#!/usr/bin/env bash
# bench/scaling_table.py on a benchmark job's files made by hand: which windows count (none of
# the warm-up steps), the median window, efficiency against one GPU, the time-weighted data
# wait, MFU, the ratio to PyTorch, a note for each run that gave no figure, the JSON beside the
# markdown, and a clear refusal of files it cannot read.
source "$(dirname "$0")/lib.sh"
table=$RDDP_SOURCE_DIR/bench/scaling_table.py
python=$(command -v python3) || { echo "SKIPPED: no python3"; exit 77; }
dir=$work/job
mkdir -p "$dir"

cat >"$dir/benchmark.json" <<'EOF'
{"job_id": "42", "job_name": "resnet_ddp_bench", "host": "node1", "date": "2030-01-02T03:04:05Z",
 "commit": "0123456789ab", "gpu_name": "Tesla V100-SXM2-32GB", "driver": "535.104.05",
 "compute_capability": "7.0", "data": "synthetic (1024 images of 32x32, 10 classes)",
 "batch_per_gpu": 128, "image_size": 32, "steps": 10, "warmup_steps": 4, "steps_per_window": 2,
 "flags": "--batchnorm fused --memory-format nhwc", "pytorch_flags": "--channels-last",
 "versions_file": "versions.txt",
 "skipped": [{"precision": "bf16", "reason": "compute capability 7.0; bf16 needs 8.0 or later"}]}
EOF
printf 'resnet_ddp 0.1.0\n  CUDA runtime  12.8\n  CUDA driver   12.2\n  cuDNN         9.8.0\n  NCCL          2.26.2\n' \
  >"$dir/versions.txt"
# step GLOBAL_STEP IMAGES_PER_S [MFU]: a step record closing a window.
step() {
  printf '{"type":"step","epoch":1,"global_step":%s,"lr":0.001,"loss":2.3,"accuracy":0.1,"images_per_s":%s%s}\n' \
    "$1" "$2" "${3:+,\"mfu\":$3}"
}
epoch() {
  printf '{"type":"epoch","epoch":1,"global_step":10,"seconds":%s,"images_per_s":1,"data_wait_share":%s,"data_wait_share_max":%s,"data_wait_share_max_rank":1}\n' "$1" "$2" "$3"
}
# One GPU: steps 1-4 are warm-up (the windows closing at 2 and 4 are left out, slow as they
# are); the median of 100, 120, 110 is 110, of the MFUs 0.33.
{ step 2 5 0.01; step 4 50 0.1; step 6 100 0.30; step 8 120 0.36; step 10 110 0.33; epoch 10 0.02 0.03; } \
  >"$dir/fp16-1gpu.jsonl"
# Two GPUs: median 200, 100 per GPU: 100/110 of one GPU's. Two epochs: data wait of the most
# waiting rank (0.10 over 6 s, 0.02 over 2 s) is 8.0 % of the time.
{ step 2 10 0.01; step 4 20 0.01; step 6 190 0.29; step 8 200 0.30; step 10 210 0.31; epoch 6 0.05 0.10
  epoch 2 0.01 0.02; } >"$dir/fp16-2gpu.jsonl"
# Eight GPUs on two nodes, no MFU (an unknown GPU's peak): the window of steps 4-6 starts in
# the warm-up and is left out; the median of 550 and 570 is 560, 70 per GPU.
{ step 3 1; step 6 900; step 8 550; step 10 570; epoch 9 0 0; } >"$dir/fp16-8gpu.jsonl"
# A run whose windows all fall in the warm-up.
{ step 2 100; step 4 100; epoch 1 0 0; } >"$dir/fp32-1gpu.jsonl"
{
  echo "some output of pytorch_ddp.py"
  echo '{"record":"throughput","impl":"pytorch-eager","status":"ok","world_size":1,"images_per_s_total":100.0,"versions":{"torch":"2.9.0","torchvision":"0.24.0"}}'
} >"$dir/pt-1gpu.log"
echo '{"record":"throughput","impl":"pytorch-eager","status":"ok","world_size":2,"images_per_s_total":160.0}' >"$dir/pt-2gpu.log"
echo "SKIPPED: pytorch_ddp.py: torch.cuda.is_available() is False" >"$dir/pt-skipped.log"
cat >"$dir/runs.jsonl" <<'EOF'
{"impl":"resnet_ddp","precision":"fp16","nodes":1,"gpus":1,"exit_status":0,"log":"a.log","records":"fp16-1gpu.jsonl"}
{"impl":"pytorch","precision":"fp16","nodes":1,"gpus":1,"exit_status":0,"log":"pt-1gpu.log"}
{"impl":"resnet_ddp","precision":"fp16","nodes":1,"gpus":2,"exit_status":0,"log":"b.log","records":"fp16-2gpu.jsonl"}
{"impl":"pytorch","precision":"fp16","nodes":1,"gpus":2,"exit_status":0,"log":"pt-2gpu.log"}
{"impl":"resnet_ddp","precision":"fp16","nodes":1,"gpus":4,"exit_status":1,"log":"c.log","records":"missing.jsonl"}
{"impl":"pytorch","precision":"fp16","nodes":1,"gpus":4,"exit_status":0,"log":"pt-skipped.log"}
{"impl":"resnet_ddp","precision":"fp16","nodes":2,"gpus":8,"exit_status":0,"log":"d.log","records":"fp16-8gpu.jsonl"}
{"impl":"pytorch","precision":"fp16","nodes":2,"gpus":8,"status":"not run: PYTORCH=off"}
{"impl":"resnet_ddp","precision":"fp32","nodes":1,"gpus":1,"exit_status":0,"log":"e.log","records":"fp32-1gpu.jsonl"}
EOF

expect 0 "^\| precision +\| nodes +\| GPUs +\| images/s +\| per GPU +\| efficiency +\| data wait +\| MFU +\| PyTorch images/s +\| PyTorch per GPU +\| PyTorch efficiency +\| ours/PyTorch +\|$" -- \
  "$python" "$table" "$dir"
cp "$work/out" "$work/printed"
# row GPUS PRECISION: the table's row, its cells squeezed to single spaces.
row() { grep -E "^\| $2 +\| [0-9]+ +\| $1 +\|" "$dir/scaling.md" | tr -s ' '; }
check "the printed table is the one written to scaling.md" cmp -s "$work/printed" "$dir/scaling.md"
check "one row per precision and GPU count, in the order run" \
  bash -c '[ "$(grep -cE "^\| fp(16|32) " "$1")" = 5 ]' _ "$dir/scaling.md"
check "1 GPU: median 110 of the windows after the warm-up, 100% efficiency, data wait 3.0%, MFU 33.0%, PyTorch 100, ratio 1.10: $(row 1 fp16)" \
  grep -qxF "| fp16 | 1 | 1 | 110 | 110 | 100.0% | 3.0% | 33.0% | 100 | 100 | 100.0% | 1.10 |" <<<"$(row 1 fp16)"
check "2 GPUs: 200 in all, 100 per GPU, 90.9% of one GPU's; data wait 8.0% by time; PyTorch 160 at 80%; 1.25: $(row 2 fp16)" \
  grep -qxF "| fp16 | 1 | 2 | 200 | 100 | 90.9% | 8.0% | 30.0% | 160 | 80 | 80.0% | 1.25 |" <<<"$(row 2 fp16)"
check "a failed run and a skipped PyTorch run are notes, with no ratio: $(row 4 fp16)" \
  grep -qxF "| fp16 | 1 | 4 | [1] | [1] | [1] | [1] | [1] | [2] | [2] | [2] | - |" <<<"$(row 4 fp16)"
check "two nodes: 560 is 70 per GPU, 63.6%; no MFU where the records carry none: $(row 8 fp16)" \
  grep -qxF "| fp16 | 2 | 8 | 560 | 70 | 63.6% | 0.0% | - | [3] | [3] | [3] | - |" <<<"$(row 8 fp16)"
check "a run with no window after the warm-up is a note; PyTorch not run at all says so: $(row 1 fp32)" \
  grep -qxF "| fp32 | 1 | 1 | [4] | [4] | [4] | [4] | [4] | not run | not run | not run | - |" <<<"$(row 1 fp32)"
check "note 1 names the failed run's exit status and log" grep -qxF "[1] failed (exit status 1): see c.log" "$dir/scaling.md"
check "note 2 is PyTorch's SKIPPED line" \
  grep -qxF "[2] SKIPPED: pytorch_ddp.py: torch.cuda.is_available() is False" "$dir/scaling.md"
check "note 3 says why PyTorch did not run" grep -qxF "[3] not run: PYTORCH=off" "$dir/scaling.md"
check "note 4 says what to change" \
  grep -qF "[4] no step window after the first 4 steps in $dir/fp32-1gpu.jsonl: run more steps (STEPS) or shorter windows (WINDOW)" "$dir/scaling.md"
check "the heading lines name the GPU, the versions, the job, the flags and the skipped precision" bash -c '
  grep -qxF -- "- GPU: Tesla V100-SXM2-32GB, compute capability 7.0, driver 535.104.05" "$1" &&
  grep -qxF -- "- resnet_ddp 0.1.0: CUDA runtime 12.8, CUDA driver 12.2, cuDNN 9.8.0, NCCL 2.26.2" "$1" &&
  grep -qxF -- "- PyTorch: torch 2.9.0, torchvision 0.24.0" "$1" &&
  grep -qxF -- "- job 42 (resnet_ddp_bench) on node1, 2030-01-02T03:04:05Z, commit 0123456789ab" "$1" &&
  grep -qxF -- "- resnet_ddp flags: --batchnorm fused --memory-format nhwc" "$1" &&
  grep -qF -- "flags: --channels-last; its batch stays on the GPU" "$1" &&
  grep -qxF -- "- not measured: bf16: compute capability 7.0; bf16 needs 8.0 or later" "$1"' _ "$dir/scaling.md"
check "scaling.json holds the environment and every row's figures" "$python" - "$dir/scaling.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["gpu"] == {"name": "Tesla V100-SXM2-32GB", "driver": "535.104.05",
                    "compute_capability": "7.0"}, s["gpu"]
assert s["versions"]["resnet_ddp"] == "0.1.0" and s["versions"]["cuDNN"] == "9.8.0", s["versions"]
assert s["pytorch_versions"] == {"torch": "2.9.0", "torchvision": "0.24.0"}
assert (s["date"], s["commit"], s["job_id"]) == ("2030-01-02T03:04:05Z", "0123456789ab", "42")
assert s["settings"]["flags"] == "--batchnorm fused --memory-format nhwc"
assert s["skipped"][0]["precision"] == "bf16"
assert len(s["columns"]) == 12 and s["columns"][-1] == "ours/PyTorch"
rows = {(r["precision"], r["gpus"]): r for r in s["rows"]}
two = rows[("fp16", 2)]
assert two["resnet_ddp"]["images_per_s_total"] == 200 and two["resnet_ddp"]["windows_kept"] == 3
assert abs(two["resnet_ddp"]["efficiency"] - 100 / 110) < 1e-12
assert abs(two["resnet_ddp"]["data_wait_share"] - (6 * 0.05 + 2 * 0.01) / 8) < 1e-12
assert abs(two["resnet_ddp"]["data_wait_share_max"] - 0.08) < 1e-12
assert abs(two["resnet_ddp"]["mfu"] - 0.30) < 1e-12
assert two["pytorch"]["efficiency"] == 0.8 and two["ratio"] == 1.25
assert rows[("fp16", 4)]["resnet_ddp"]["status"].startswith("failed (exit status 1)")
assert rows[("fp16", 8)]["resnet_ddp"]["mfu"] is None and rows[("fp16", 8)]["ratio"] is None
assert rows[("fp32", 1)]["pytorch"] is None
EOF

# Files it cannot read: the message names the file (and line) and the job ends non-zero.
expect 1 "scaling_table.py: $work/nowhere/benchmark.json: No such file or directory: is this a benchmark job's directory\?" -- \
  "$python" "$table" "$work/nowhere"
cp "$dir/runs.jsonl" "$work/runs.jsonl"
echo '{"impl":"resnet_ddp","precision":"fp16"' >>"$dir/runs.jsonl"
expect 1 "scaling_table.py: $dir/runs.jsonl:10: not a JSON object" -- "$python" "$table" "$dir"
cp "$work/runs.jsonl" "$dir/runs.jsonl"
echo '{"impl":"resnet_ddp","precision":"fp16","nodes":1,"gpus":16,"exit_status":0,"log":"f.log"}' >>"$dir/runs.jsonl"
expect 1 "scaling_table.py: $dir/runs.jsonl:10: a run without records" -- "$python" "$table" "$dir"
cp "$work/runs.jsonl" "$dir/runs.jsonl"
echo '{"type":"step","global_step":12}' >>"$dir/fp16-1gpu.jsonl"
expect 1 "scaling_table.py: $dir/fp16-1gpu.jsonl: a step record without global_step and images_per_s" -- \
  "$python" "$table" "$dir"
: >"$dir/runs.jsonl"
expect 1 "scaling_table.py: $dir/runs.jsonl: no runs: the job ended before its first run" -- "$python" "$table" "$dir"
finish
