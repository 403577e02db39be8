#!/usr/bin/env bash
# bench/compare_throughput.py names, for each configuration, the fastest resnet_ddp variant
# against the fastest layout of each PyTorch mode, and says why a cell has no figure.
source "$(dirname "$0")/lib.sh"
tables=$RDDP_SOURCE_DIR/bench/compare_throughput.py
python=$("$RDDP_SOURCE_DIR/scripts/find_python.sh" json) ||
  { echo "SKIPPED: no python3"; exit 77; }

# record IMPL FORMAT IMAGES_PER_S: one bf16 measurement of the 32x32 configuration.
record() {
  printf '{"record":"throughput","impl":"%s","memory_format":"%s","status":"ok","gpu":"G","world_size":1,"ddp":false,"stem":"cifar","image_size":32,"batch_per_gpu":128,"classes":10,"optimizer":"adamw","precision":"bf16","params":11173962,"flops_per_image":3.33253632e+09,"images_per_s_per_gpu":%s,"tflops_per_gpu":40.0,"device_mem_peak_bytes":1073741824,"step_ms":9.0,"split_ms":{"data":0,"forward_backward":8.9,"comm_exposed":0,"optimizer":0.1,"idle":0}}\n' "$1" "$2" "$3"
}
{
  record resnet_ddp nchw 13000
  record resnet_ddp-fusedbn nhwc 18000
  record resnet_ddp-graphs nchw 16000
  record pytorch-eager nchw 12000
  record pytorch-eager channels_last 15000
  echo '{"record":"throughput","impl":"pytorch-compile","status":"timed out after 150 s","gpu":"G","world_size":1,"ddp":false,"stem":"cifar","image_size":32,"batch_per_gpu":128,"classes":10,"optimizer":"adamw","precision":"bf16","memory_format":"nchw"}'
  # A graph-API run with one convolution on the legacy API (the table says so, and why).
  printf '{"record":"throughput","impl":"resnet_ddp-fusedbn-cudnngraph","memory_format":"nhwc","status":"ok","gpu":"G","world_size":1,"ddp":false,"stem":"cifar","image_size":32,"batch_per_gpu":128,"classes":10,"optimizer":"adamw","precision":"bf16","params":11173962,"flops_per_image":3.33253632e+09,"images_per_s_per_gpu":17500,"tflops_per_gpu":40.0,"device_mem_peak_bytes":1073741824,"step_ms":9.0,"conv_api":"graph","conv_graph_plans":62,"conv_legacy_algorithms":1,"conv_graph_fallback":"cuDNN refused its operation graph: X","setup_s":7.25}\n'
} >"$work/records.jsonl"
# row_of TITLE: the 32x32 row of the table under the heading that starts with TITLE.
row_of() {
  awk -v title="### $1" 'index($0, "### ") == 1 { inside = index($0, title) == 1 }
                         inside && /^\| 1 \| 32x32/ { print; exit }' "$work/out"
}

expect 0 "fastest resnet_ddp variant / fastest pytorch-eager" -- "$python" "$tables" "$work/records.jsonl"
row=$(row_of "Images/s")
# 18000 / 15000: our NHWC fused-BatchNorm run against eager in channels_last, not in NCHW.
check "the fastest of ours over the fastest eager layout: $row" grep -qF "| 1.20 (fusedbn (nhwc) vs channels_last) |" <<<"$row"
check "the plain column's own ratio to eager NCHW stays: 13000 / 12000" grep -qF "| 1.08 |" <<<"$row"
check "a run that gave no figure says why" grep -qF "timed out after 150 s" <<<"$row"
check "no ratio against a mode with no figure" grep -qE "\| - \|$" <<<"$row"

# The goals table: 18000 over eager's 15000 is 1.20, short of 1.3; compile gave no figure; our
# fused run's 1 GiB peak is no higher than the lowest of PyTorch's (all 1 GiB here).
graph=$(row_of "Convolutions on cuDNN's graph API")
check "the graph-API run's convolutions, set-up and fallback: $graph" \
  grep -qF "| resnet_ddp-fusedbn-cudnngraph (nhwc) | 62 | 1 | 7.2 | cuDNN refused its operation graph: X |" <<<"$graph"

goal=$(row_of Goals)
check "goals: the fastest of ours is named with its rate: $goal" grep -qF "| resnet_ddp-fusedbn (nhwc): 18000/s |" <<<"$goal"
check "goals: short of 1.3x eager, against eager's fastest layout" \
  grep -qF "| short: 1.20 (goal >= 1.30, against pytorch-eager (channels_last)) |" <<<"$goal"
check "goals: no verdict against a compile run that gave no figure" grep -qF "| no figure for torch.compile |" <<<"$goal"
check "goals: memory met at equal peaks" grep -qF "| met: 1.00 GiB against 1.00" <<<"$goal"
check "goals: the summary counts no configuration as met" grep -qF "All three met in 0 of 1 configurations" "$work/out"

# Two runs' files merge: the second run measured compile and left out eager's NCHW run; the
# table keeps the first run's eager figure and takes the second's compile figure.
{
  record pytorch-compile nchw 17000
  echo '{"record":"throughput","impl":"pytorch-eager","status":"not run: time budget spent","gpu":"G","world_size":1,"ddp":false,"stem":"cifar","image_size":32,"batch_per_gpu":128,"classes":10,"optimizer":"adamw","precision":"bf16","memory_format":"nchw"}'
} >"$work/second.jsonl"
expect 0 "fastest resnet_ddp variant" -- "$python" "$tables" "$work/records.jsonl" "$work/second.jsonl"
row=$(row_of "Images/s")
check "merged: eager NCHW keeps the first run's 12000 and compile takes 17000: $row" \
  grep -qF "| 13000 | 12000 | 17000 |" <<<"$row"
goal=$(row_of Goals)
check "merged goals: 18000 over compile's 17000 is ahead: $goal" \
  grep -qF "| met: 1.06 (goal > 1, against pytorch-compile) |" <<<"$goal"
check "merged goals: still short of 1.3x eager, so not counted as met" \
  grep -qF "All three met in 0 of 1 configurations" "$work/out"
check "merged: no status where a figure exists" bash -c '! grep -qF "not run: time budget spent" <<<"$1"' _ "$row"

# Files of two GPUs are refused: one table compares one GPU's runs.
sed 's/"gpu":"G"/"gpu":"H"/' "$work/second.jsonl" >"$work/other-gpu.jsonl"
expect 1 "Records of several GPUs \(G, H\)" -- "$python" "$tables" "$work/records.jsonl" "$work/other-gpu.jsonl"
finish
