#!/usr/bin/env bash
# scripts/gpu_check.sh keeps several parts run in one command within the command's --budget, so
# that they fit a machine lent for a fixed time a command. No GPU is needed: a stand-in
# nvidia-smi names one, and a stand-in kernels_bench outlives any budget. The sanitize part runs
# each compute-sanitizer tool (a stand-in that logs its arguments) over the kernel tests; the
# profile part runs each benchmark under nsys, or where there is none under ncu (stand-ins
# too), keeps its summaries and splits their kernel time per step by category, side by side.
source "$(dirname "$0")/lib.sh"
script=$RDDP_SOURCE_DIR/scripts/gpu_check.sh

expect 2 "--budget needs whole seconds" -- "$script" --dry-run --budget soon
expect 2 "no part 'nosuch'" -- "$script" --dry-run --part nosuch
expect 0 "1610 s of the command's 560 s budget, which cuts the last ones short" -- \
  "$script" --dry-run --part tests,kernels,engine --budget 560
expect 0 "450 s of the command's 600 s budget$" -- "$script" --dry-run --part kernels --budget 600
expect 0 "pytorch_convs.py .*/kernel_benchmarks.log --json .*-convs.jsonl" -- \
  "$script" --dry-run --part kernels
RDDP_KERNELS_ONLY=convolutions expect 0 "kernels_bench --only convolutions" -- \
  "$script" --dry-run --part kernels
# kernels_bench refuses a section it does not have before it looks for a GPU.
kernels_bench=$(dirname "$RDDP_BIN")/bench/kernels_bench
if [ -x "$kernels_bench" ]; then
  expect 2 "no section 'conv'" -- "$kernels_bench" --only conv
  expect 2 "sections: softmax,optimizers,weights,batchnorm,convolutions" -- \
    "$kernels_bench" --only
fi

mkdir -p "$work/bin" "$work/build/bench" "$work/reports"
printf '#!/bin/sh\necho "Stand-in GPU"\n' >"$work/bin/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' >"$work/build/resnet_ddp"
printf '#!/bin/sh\necho "kernels_bench started"\nexec sleep 600\n' >"$work/build/bench/kernels_bench"
chmod +x "$work/bin/nvidia-smi" "$work/build/resnet_ddp" "$work/build/bench/kernels_bench"

# The kernels step would have 300 s of its part's 520; the command's 12 s cut it to what is left.
start=$SECONDS
PATH=$work/bin:$PATH RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports RDDP_COMMIT=test \
  expect 1 "FAIL \(ran past its limit of 1[0-2] s\)" -- "$script" --part kernels --budget 12
check "the command ended within its budget and the kill grace ($((SECONDS - start)) s)" \
  [ $((SECONDS - start)) -le 30 ]
report=$(ls "$work"/reports/gpu-check-Stand-in-GPU-*.md)
check "the report names the command's budget and the cut step" \
  grep -q "kernel benchmarks: FAIL (ran past its limit of 1[0-2] s)" "$report"

# The sanitize part runs each tool over the kernel tests, checking only our kernels.
expect 0 "compute-sanitizer --tool racecheck --error-exitcode 1 --kernel-regex kns=rddp .*gpu_tests" -- \
  "$script" --dry-run --part sanitize
mkdir -p "$work/build/tests"
printf '#!/bin/sh\necho "gpu tests: $*"\n' >"$work/build/tests/gpu_tests"
cat >"$work/bin/compute-sanitizer" <<'STANDIN'
#!/bin/sh
if [ "$1" = --help ]; then echo "  --kernel-regex <regex>"; exit 0; fi
echo "$*" >>"$SANITIZER_LOG"
while [ $# -gt 0 ]; do
  case $1 in --tool|--error-exitcode|--kernel-regex) shift 2 ;; *) break ;; esac
done
exec "$@"
STANDIN
chmod +x "$work/build/tests/gpu_tests" "$work/bin/compute-sanitizer"
PATH=$work/bin:$PATH SANITIZER_LOG=$work/sanitizer.log RDDP_BUILD_DIR=$work/build \
  RDDP_REPORT_DIR=$work/reports RDDP_COMMIT=test \
  expect 0 "compute-sanitizer synccheck, our kernels\$" -- "$script" --part sanitize --budget 120
for tool in memcheck racecheck synccheck; do
  check "the sanitize part ran $tool on the kernel tests, our kernels only" \
    grep -q -- "--tool $tool --error-exitcode 1 --kernel-regex kns=rddp $work/build/tests/gpu_tests --source-file=\*/test_kernels.cu,\*/test_cuda_batchnorm_kernels.cpp" \
    "$work/sanitizer.log"
done

# The profile part collects each benchmark's timed windows under nsys (a stand-in that runs the
# program and writes what it printed as the report), then keeps nsys' kernel summaries, and
# last splits the kernel time per step by category, against torch.compile's.
expect 0 "nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop .* --profile --memory-format nhwc --batchnorm fused" -- \
  "$script" --dry-run --part profile
check "the dry run lists the breakdown by category of the three kernel summaries in CSV" \
  grep -qE "python3 .*/bench/profile_breakdown.py --steps 10 --baseline pytorch-compile --output .*-profile-breakdown.md --table-output .* resnet_ddp-nhwc-fusedbn=.*-profile-resnet_ddp-nhwc-fusedbn.csv resnet_ddp-nhwc-fusedbn-cudnngraph=.*-profile-resnet_ddp-nhwc-fusedbn-cudnngraph.csv pytorch-compile=.*-profile-pytorch-compile.csv" \
  "$work/out"
check "the profile part's steps, breakdown included, fit its budget" \
  grep -q "its steps' limits add up to 520 s of its 520 s budget$" "$work/out"
check "the graph API's convolutions are profiled too" \
  grep -q "nsys profile .* --memory-format nhwc --batchnorm fused --conv-api graph" "$work/out"
# With --format csv, a kernel summary as nsys prints it: a progress line, then the table, where
# the BatchNorm kernels (ours, Inductor's) take 4 and 2 ms a step and a convolution 3 (2.5
# through the graph API).
cat >"$work/bin/nsys" <<'STANDIN'
#!/bin/sh
command=$1
shift
if [ "$command" = stats ]; then
  for last in "$@"; do :; done
  case " $* " in
    *" --format csv "*)
      echo "Processing [$last] with [cuda_gpu_kern_sum.py]... "
      echo '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Name"'
      conv=30000000
      if grep -q -- "--conv-api graph" "$last"; then conv=25000000; fi
      echo "\"50.0\",\"$conv\",\"160\",\"187500.0\",\"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn\""
      if grep -q pytorch "$last"; then bn='"20000000","100","200000.0","triton_red_fused__native_batch_norm_legit_functional_0"'
      else bn='"40000000","200","200000.0","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int)"'; fi
      echo "\"50.0\",$bn" ;;
    *) echo "kernel time by kernel and range of: $(cat "$last")" ;;
  esac
  exit 0
fi
while [ "$1" != -o ]; do shift; done
output=$2
shift 2
"$@" >"$output.nsys-rep"
STANDIN
printf '#!/bin/sh\necho "step bench $*"\n' >"$work/build/bench/cuda_step_bench"
printf '#!/bin/sh\n[ "$1" = -c ] || echo "pytorch $*"\n' >"$work/bin/python"
chmod +x "$work/bin/nsys" "$work/build/bench/cuda_step_bench" "$work/bin/python"
PATH=$work/bin:$PATH RDDP_PYTHON=$work/bin/python RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports \
  RDDP_COMMIT=test expect 0 "nsys stats, pytorch-compile\$" -- "$script" --part profile --budget 120
check "our NHWC fused-BatchNorm run was profiled over its timed windows only" \
  grep -q "of: step bench --size 224 --batch 256 --precision bf16 --warmup 10 --windows 1 --steps-per-window 10 --profile --memory-format nhwc --batchnorm fused" \
  "$work"/reports/gpu-check-Stand-in-GPU-*-profile-resnet_ddp-nhwc-fusedbn.txt
check "torch.compile's run too" \
  grep -q "of: pytorch .*/bench/pytorch_ddp.py --mode compile --size 224 .* --profile" \
  "$work"/reports/gpu-check-Stand-in-GPU-*-profile-pytorch-compile.txt
check "each kernel summary is kept in CSV beside the report" \
  grep -q "triton_red_fused__native_batch_norm" "$work"/reports/gpu-check-Stand-in-GPU-*-profile-pytorch-compile.csv
# Ours: 4 ms of BatchNorm and 3 of convolution make 7 a step, 57.1 %; 4 of 6.5 through the
# graph API, 61.5 %; torch.compile's 2 of 5, 40 %.
check "the report holds kernel time per step by category, the three side by side" \
  grep -qxF "| BatchNorm | 4.000 (57.1 %) | 4.000 (61.5 %) | 2.000 (40.0 %) |" \
  "$work"/reports/gpu-check-Stand-in-GPU-*[0-9].md
check "and where ours spends more than torch.compile's" \
  grep -qxF "| BatchNorm | +2.000 | +2.000 |" "$work"/reports/gpu-check-Stand-in-GPU-*[0-9].md
check "and where the graph API's convolutions differ" \
  grep -qxF "| convolution forward | 0.000 | -0.500 |" "$work"/reports/gpu-check-Stand-in-GPU-*[0-9].md
check "each category's longest kernels in <report>-profile-breakdown.md" \
  grep -qF '| resnet_ddp-nhwc-fusedbn | 4.000 | 20 | 200.0 | `normalize_kernel<__nv_bfloat16, true, 8>` |' \
  "$work"/reports/gpu-check-Stand-in-GPU-*-profile-breakdown.md

# Where the only nsys is Nsight Compute's helper (it makes no report of its own), the profile
# part takes ncu: 2 steps, every launch's duration in ncu's raw page, summed by kernel.
# The stand-in writes the launches of the same kernels as above: two BatchNorm launches a step.
mkdir -p "$work/nsight-compute/host" "$work/ncu-bin" "$work/ncu-reports"
printf '#!/bin/sh\necho "Nsight Compute helper: no report" >&2\nexit 1\n' \
  >"$work/nsight-compute/host/nsys"
cat >"$work/ncu-bin/ncu" <<'STANDIN'
#!/bin/sh
if [ "$1" = --import ]; then
  report=$2
  case " $* " in
    *" --csv --page raw --print-units base "*)
      echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum"'
      echo '"","","","","","","","","","","","nsecond"'
      conv=3000000
      if grep -q -- "--conv-api graph" "$report"; then conv=2500000; fi
      if grep -q pytorch "$report"; then bn=triton_red_fused__native_batch_norm_legit_functional_0 bn_ns=1,000,000
      else bn='void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int)' bn_ns=2,000,000; fi
      for id in 0 3; do
        echo "\"$id\",\"7\",\"p\",\"h\",\"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn\",\"1\",\"7\",\"(128, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"9.0\",\"$conv\""
        for next in 1 2; do
          echo "\"$((id + next))\",\"7\",\"p\",\"h\",\"$bn\",\"1\",\"7\",\"(256, 1, 1)\",\"(64, 8, 1)\",\"0\",\"9.0\",\"$bn_ns\""
        done
      done ;;
    *) echo "per-kernel summary of: $(cat "$report")" ;;
  esac
  exit 0
fi
options=
while [ "$1" != -o ]; do options="$options $1"; shift; done
output=$2
shift 2
{ echo "ncu$options"; "$@"; } >"$output.ncu-rep"
STANDIN
cp "$work/bin/nvidia-smi" "$work/bin/python" "$work/ncu-bin/"
chmod +x "$work/nsight-compute/host/nsys" "$work/ncu-bin/ncu"
PATH=$work/nsight-compute/host:$work/ncu-bin:$PATH RDDP_PYTHON=$work/ncu-bin/python \
  RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/ncu-reports RDDP_COMMIT=test \
  expect 0 "ncu summary, pytorch-compile\$" -- "$script" --part profile --budget 120
check "ncu collected the 2 timed steps only" \
  grep -q "step bench --size 224 --batch 256 --precision bf16 --warmup 10 --windows 1 --steps-per-window 2 --profile --memory-format nhwc --batchnorm fused --conv-api graph" \
  "$work"/ncu-reports/gpu-check-Stand-in-GPU-*-profile-resnet_ddp-nhwc-fusedbn-cudnngraph.txt
check "each kernel's duration, with the clocks and caches left as they are" \
  grep -q "of: ncu --profile-from-start off --target-processes application-only --clock-control none --cache-control none --metrics gpu__time_duration.sum --force-overwrite" \
  "$work"/ncu-reports/gpu-check-Stand-in-GPU-*-profile-resnet_ddp-nhwc-fusedbn-cudnngraph.txt
check "the same kernel time per step by category as under nsys" \
  grep -qxF "| BatchNorm | 4.000 (57.1 %) | 4.000 (61.5 %) | 2.000 (40.0 %) |" \
  "$work"/ncu-reports/gpu-check-Stand-in-GPU-*[0-9].md
check "launches counted one a row: 3 a step" \
  grep -qxF "| kernel launches | 3 | 3 | 3 |" "$work"/ncu-reports/gpu-check-Stand-in-GPU-*[0-9].md
# With neither profiler the part says so and skips, naming where it looked.
mkdir -p "$work/plain-bin"
cp "$work/bin/nvidia-smi" "$work/plain-bin/"
PATH=$work/plain-bin:/usr/bin:/bin RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/plain-reports \
  RDDP_COMMIT=test expect 0 "SKIPPED: no nsys or ncu on this machine" -- \
  "$script" --part profile --budget 30
PATH=$work/bin:$PATH RDDP_PROFILER=perf RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports \
  RDDP_COMMIT=test expect 1 "RDDP_PROFILER is nsys or ncu, not 'perf'" -- \
  "$script" --part profile --budget 60

# A GPU below compute capability 8.0, as nvidia-smi reports a V100: every bf16 run is skipped,
# saying so, and fp16 runs where bf16 was the point. The bfloat16 gradient allreduce stays: NCCL
# sums bfloat16 in float on such a GPU, and our casts need no tensor cores.
mkdir -p "$work/v100-bin"
cat >"$work/v100-bin/nvidia-smi" <<'STANDIN'
#!/bin/sh
case "$*" in
  *compute_cap*) echo "7.0" ;;
  *driver_version*) echo "535.54.03" ;;
  *) echo "Tesla V100-SXM2-32GB" ;;
esac
STANDIN
chmod +x "$work/v100-bin/nvidia-smi"
skip_note="bf16 skipped: compute capability 7.0 has no bfloat16 tensor cores \(8.0 and later\); fp16 runs in its place"
PATH=$work/v100-bin:$PATH expect 0 "^compute capability 7.0: $skip_note$" -- \
  "$script" --dry-run --part precision,engine,mixed,data,profile
check "no run on the V100 asks for bf16" bash -c '! grep -q -- "--precision bf16" "$1"' _ "$work/out"
check "the precision part and the mixed part each say bf16 was skipped" \
  [ "$(grep -cE "^   $skip_note$" "$work/out")" = 2 ]
check "the precision part compares fp32, tf32 and fp16" \
  [ "$(grep -oE '\] precision [a-z0-9]+: Fashion' "$work/out" | cut -d' ' -f3 | tr -d : | xargs)" = "fp32 tf32 fp16" ]
check "the mixed part runs fp16 alone, in both layouts with both BatchNorms" \
  [ "$(grep -cE '\] fp16 (nchw|nhwc) (cudnn|fused): 300 synthetic steps' "$work/out")/$(grep -cE '\] [a-z0-9]+ [a-z]+ [a-z]+: 300 synthetic steps' "$work/out")" = 4/4 ]
check "the data part and the engine part's replayed step run fp16" \
  bash -c 'grep -q "3 epochs from the pack, fp16" "$1" &&
           grep -qE "cuda_step_bench .*--precision fp16 .*--ddp --cuda-graphs on --grad-allreduce bf16" "$1"' _ "$work/out"
check "the profile part profiles fp16 steps, ours and torch.compile's" \
  [ "$(grep -cE "(cuda_step_bench|pytorch_ddp.py --mode compile) --size 224 --batch 256 --precision fp16 " "$work/out")" = 3 ]
PATH=$work/v100-bin:$work/bin:$PATH RDDP_PYTHON=$work/bin/python RDDP_BUILD_DIR=$work/build \
  RDDP_REPORT_DIR=$work/v100-reports RDDP_COMMIT=test \
  expect 0 "nsys stats, pytorch-compile\$" -- "$script" --part profile --budget 120
v100_report=$(ls "$work"/v100-reports/gpu-check-Tesla-V100-SXM2-32GB-*[0-9].md)
check "the report names the compute capability and why bf16 was skipped" \
  bash -c 'grep -q "compute capability 7.0$" "$1" && grep -qE "^$2\.$" "$1"' _ "$v100_report" "$skip_note"
check "the V100's steps were profiled in fp16" \
  grep -q "of: step bench --size 224 --batch 256 --precision fp16 " \
  "$work"/v100-reports/gpu-check-Tesla-V100-SXM2-32GB-*-profile-resnet_ddp-nhwc-fusedbn.txt

# A kernels_bench that ends: PyTorch's convolutions are timed on its records (here, with no GPU,
# bench/pytorch_convs.py says it skipped), and both outputs go beside the report.
if python=$("$RDDP_SOURCE_DIR/scripts/find_python.sh" torch 2>/dev/null); then
  cat >"$work/build/bench/kernels_bench" <<'STANDIN'
#!/bin/sh
echo "224x224 convolutions, bf16"
echo '{"record":"conv","precision":"bf16","name":"layer4 3x3","batch":256,"in_channels":512,"size":7,"out_channels":512,"kernel":3,"stride":1,"pad":1,"count":3,"direction":"forward","in_step_sum":true,"layout":"nhwc","legacy_us":100,"legacy_algorithm":1,"graph_us":90,"graph_engine":3}'
STANDIN
  PATH=$work/bin:$PATH RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports RDDP_COMMIT=test \
    expect 0 "PyTorch's convolutions beside ours" -- "$script" --part kernels --budget 200
  check "kernels_bench's output beside the report" grep -q '"record":"conv"' "${report%.md}-kernels.txt"
  check "pytorch_convs.py read its one record" grep -q "1 rows of .*kernel_benchmarks.log\|SKIPPED: pytorch_convs.py" \
    "${report%.md}-convs.md"
else
  echo "(no Python with torch here: the kernels part's PyTorch step is not run)"
fi

# With the budget spent, a step is not started at all, and says whose budget it was.
PATH=$work/bin:$PATH RDDP_BUILD_DIR=$work/build RDDP_REPORT_DIR=$work/reports RDDP_COMMIT=test \
  expect 1 "NOT RUN: the part's budget of 520 s or the command's of 5 s is spent" -- \
  "$script" --part kernels --budget 5
finish
