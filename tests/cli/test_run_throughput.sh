#!/usr/bin/env bash
# bench/run_throughput.sh, the one command that measures a lent GPU, run end to end here so that
# a fault in the script shows before a GPU's minutes are spent on it. A stand-in nvidia-smi names
# a GPU; the benchmark is cuda_step_bench built against the CUDA emulator, whose steps really
# run (at a batch of 4 and a few steps, which a stand-in rewrites the script's settings to);
# PyTorch's side is the real bench/pytorch_ddp.py, which finds no GPU and says so in its cells.
source "$(dirname "$0")/lib.sh"
script=$RDDP_SOURCE_DIR/bench/run_throughput.sh
[ -x "${RDDP_EMULATED_STEP_BENCH:-}" ] ||
  { echo "SKIPPED: no emulated cuda_step_bench at '${RDDP_EMULATED_STEP_BENCH:-}' (built where mpiexec is found)"; exit 77; }
"$RDDP_SOURCE_DIR/scripts/find_python.sh" json >/dev/null || { echo "SKIPPED: no python3"; exit 77; }

# Arguments are checked before anything runs.
expect 2 "--impls: 'resnet_ddp-nosuch' is not one of" -- "$script" --dry-run --impls resnet_ddp-nosuch
expect 2 "--budget needs whole seconds, got 'soon'" -- "$script" --dry-run --budget soon
expect 2 "--sizes: '64' is not one of 32,224" -- "$script" --dry-run --sizes 64
expect 2 "--grad-allreduce must be fp32 or bf16, got 'fp8'" -- "$script" --dry-run --grad-allreduce fp8
expect 2 "--compile-limit needs whole seconds, got '0'" -- "$script" --dry-run --compile-limit 0
# And the benchmark's own flags, before it builds anything.
expect 2 "--cuda-graphs must be 'on' or 'off', got 'maybe'" -- "$RDDP_EMULATED_STEP_BENCH" --cuda-graphs maybe
expect 2 "unknown flag '--wgrad-stream'" -- "$RDDP_EMULATED_STEP_BENCH" --wgrad-stream on

# Without a GPU the real command skips, visibly; the dry run prints what it would run.
mkdir -p "$work/empty-path"
expect 0 "^SKIPPED: run_throughput.sh: no GPU answers" -- \
  env PATH="$work/empty-path:/usr/bin:/bin" "$script" --prebuilt --build-dir "$work/none"
mkdir -p "$work/real/bench"
ln -s "$RDDP_EMULATED_STEP_BENCH" "$work/real/bench/cuda_step_bench"
expect 0 "resnet_ddp-fusedbn-cudnngraph-graphs, 224x224, batch 256, fp16, nhwc" -- \
  "$script" --dry-run --prebuilt --build-dir "$work/real" --with-nhwc \
  --impls resnet_ddp-fusedbn-cudnngraph-graphs,pytorch-eager
dry=$(cat "$work/out")
check "the graph-API variant runs only in NHWC, with its flags" \
  grep -qE "cuda_step_bench .*--memory-format nhwc --batchnorm fused --conv-api graph --cuda-graphs on" <<<"$dry"
check "no graph-API run in NCHW" bash -c '! grep -qE "memory-format nchw .*--conv-api graph" <<<"$1"' _ "$dry"
check "eager PyTorch runs channels_last where resnet_ddp runs NHWC" \
  grep -qE "pytorch_ddp.py --mode eager .*--precision bf16 .*--channels-last" <<<"$dry"
# The compiled run that needs longer than the others gets a command of its own.
expect 0 "timeout 540s: .*pytorch_ddp.py --mode compile --stem imagenet --size 224 .*--precision fp32" -- \
  "$script" --dry-run --prebuilt --build-dir "$work/real" --impls pytorch-compile --sizes 224 \
  --precisions fp32 --compile-limit 540 --budget 570
# --goals: whole configurations one after the other, the mixed-precision ImageNet case first.
expect 2 "--goals chooses its own runs" -- "$script" --dry-run --goals --impls resnet_ddp
expect 2 "--goals measures tf32 and bf16 only" -- "$script" --dry-run --goals --precisions fp16
expect 0 "pytorch-compile, 32x32, batch 128, tf32" -- \
  "$script" --dry-run --prebuilt --build-dir "$work/real" --goals
goal_order=$(grep -oE '^== [a-z0-9_-]+, [0-9x]+, batch [0-9]+, [a-z0-9]+, [a-z_]+' "$work/out" | cut -c4-)
expected_order=$(for config in "224x224, batch 256, bf16" "32x32, batch 128, bf16" \
                                "224x224, batch 256, tf32" "32x32, batch 128, tf32"; do
  echo "resnet_ddp-fusedbn-cudnngraph-graphs, $config, nhwc"
  echo "resnet_ddp-fusedbn-graphs, $config, nhwc"
  echo "resnet_ddp-fusedbn-graphs, $config, nchw"
  echo "resnet_ddp-graphs, $config, nchw"
  echo "pytorch-eager, $config, nchw"
  echo "pytorch-eager, $config, channels_last"
  echo "pytorch-compile, $config, nchw"
done)
check "--goals runs each configuration whole, bf16 and 224x224 first" [ "$goal_order" = "$expected_order" ]
check "--goals replays our steps from a graph, with the variant's flags" \
  grep -qE "cuda_step_bench --stem cifar --size 32 .*--precision tf32 .*--memory-format nhwc --batchnorm fused --conv-api graph --cuda-graphs on" "$work/out"
expect 0 "pytorch-compile, 32x32, batch 128, bf16" -- \
  "$script" --dry-run --prebuilt --build-dir "$work/real" --goals --sizes 32 --precisions bf16
check "--sizes and --precisions narrow --goals to one configuration, all 7 of its runs" \
  [ "$(grep -c '^== .*, 32x32, batch 128, bf16, ' "$work/out")/$(grep -c '^== [a-z0-9_-]*, ' "$work/out")" = 7/7 ]
# A GPU below compute capability 8.0, as nvidia-smi reports a V100: bf16 is skipped, saying so,
# fp16 runs where bf16 was asked for, and tf32 is said to compute in plain float32 there.
mkdir -p "$work/v100-bin"
printf '#!/bin/sh\necho "Tesla V100-SXM2-32GB, 535.54.03, 7.0"\n' >"$work/v100-bin/nvidia-smi"
chmod +x "$work/v100-bin/nvidia-smi"
on_v100() { PATH=$work/v100-bin:$PATH "$@"; }
expect 0 "^== bf16 skipped: Tesla V100-SXM2-32GB has compute capability 7.0, and bf16 needs 8.0 \(bfloat16 tensor cores\); fp16 is measured as well$" -- \
  on_v100 "$script" --dry-run --prebuilt --build-dir "$work/real" --impls resnet_ddp,pytorch-eager
check "no run on the V100 asks for bf16" bash -c '! grep -q -- "--precision bf16" "$1"' _ "$work/out"
check "tf32, fp32 and fp16 each run once a size on the V100" \
  [ "$(grep -oE '^== resnet_ddp, [0-9x]+, batch [0-9]+, [a-z0-9]+' "$work/out" | cut -d, -f4 | sort | uniq -c |
       awk '{ printf "%s%s=%s", sep, $2, $1; sep = " " }')" = "fp16=2 fp32=2 tf32=2" ]
check "the V100's tf32 is said to be plain float32" \
  grep -q "^== tf32 computes in plain float32 on compute capability 7.0 (no TF32 units)$" "$work/out"
expect 0 "fp16 measured in its place" -- on_v100 "$script" --dry-run --prebuilt --build-dir "$work/real" --goals
v100_goals=$(grep -oE '^== [a-z0-9_-]+, [0-9x]+, batch [0-9]+, [a-z0-9]+' "$work/out" | cut -d, -f2,4 | uniq)
check "--goals on the V100 measures fp16 in bf16's place, 224x224 first, then tf32" \
  [ "$v100_goals" = "$(printf ' 224x224, fp16\n 32x32, fp16\n 224x224, tf32\n 32x32, tf32')" ]
check "--goals on the V100 runs no bf16" bash -c '! grep -q -- "--precision bf16" "$1"' _ "$work/out"
if "$RDDP_SOURCE_DIR/scripts/find_python.sh" torch torchvision >/dev/null 2>&1; then
  check "the dry run compared both sides' models (no mismatch reported)" \
    bash -c '! grep -q "count different models" <<<"$1" && ! grep -q "model check left out" <<<"$1"' _ "$dry"
fi

# The stand-ins: a GPU for nvidia-smi, GPU tests that pass, and the emulated benchmark at a
# size the CPU runs in seconds. --describe and --device-info pass through as they are.
mkdir -p "$work/bin" "$work/build/bench" "$work/build/tests"
printf '#!/bin/sh\necho "Stand-in GPU, 999.99, 9.0"\n' >"$work/bin/nvidia-smi"
printf '#!/bin/sh\necho "gpu tests: all passed"\n' >"$work/build/tests/gpu_tests"
# With --kernel-csv it writes, as CUPTI would have on a GPU, two kernels' times a step (the
# emulator has none to trace: its own refusal is checked at the end).
cat >"$work/build/bench/cuda_step_bench" <<STANDIN
#!/usr/bin/env bash
args=() kernel_csv="" kernel_steps=0
while [ \$# -gt 0 ]; do
  case \$1 in
    --batch) args+=(--batch 4); shift ;;
    --warmup) args+=(--warmup 3); shift ;;
    --windows) args+=(--windows 1); shift ;;
    --steps-per-window) args+=(--steps-per-window 2); shift ;;
    --kernel-csv) kernel_csv=\$2; shift ;;
    --kernel-steps) kernel_steps=\$2; shift ;;
    *) args+=("\$1") ;;
  esac
  shift
done
[[ " \${args[*]} " == *" --device-info "* ]] || args+=(--conv-algorithms heuristic)
"$RDDP_EMULATED_STEP_BENCH" "\${args[@]}" || exit
[ -z "\$kernel_csv" ] || printf '%s\\n' '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Name"' \\
  "75.0,\$((3000000 * kernel_steps)),\$kernel_steps,3000000.0,\"void rddp::cuda::(anonymous namespace)::grad_sums_kernel<float, 4, true, false>(int)\"" \\
  "25.0,\$((1000000 * kernel_steps)),\$kernel_steps,1000000.0,\"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc\"" >"\$kernel_csv"
STANDIN
chmod +x "$work/bin/nvidia-smi" "$work/build/tests/gpu_tests" "$work/build/bench/cuda_step_bench"
run() {
  PATH=$work/bin:$PATH RDDP_COMMIT=test-commit "$script" --prebuilt --build-dir "$work/build" "$@"
}

# GPU tests that fail stop the command before any measurement.
printf '#!/bin/sh\necho "gpu tests: 1 failed"\nexit 1\n' >"$work/build/tests/gpu_tests-failing"
chmod +x "$work/build/tests/gpu_tests-failing"
mv "$work/build/tests/gpu_tests" "$work/build/tests/gpu_tests-passing"
mv "$work/build/tests/gpu_tests-failing" "$work/build/tests/gpu_tests"
expect 1 "no measurement from a program that computes wrongly" -- \
  run --results-dir "$work/refused" --sizes 32 --precisions bf16 --impls resnet_ddp
check "a failed test run writes no results" bash -c '! ls "$1"/throughput-* 2>/dev/null' _ "$work/refused"
# Unless asked to measure anyway: then the results say the tests failed, and how many.
printf '#!/bin/sh\necho "[doctest] test cases: 50 | 49 passed | 1 failed | 0 skipped"\nexit 1\n' \
  >"$work/build/tests/gpu_tests"
expect 0 "measuring anyway" -- run --results-dir "$work/anyway" --sizes 32 --precisions bf16 \
  --impls resnet_ddp --measure-despite-failed-tests
check "measuring anyway prints no refusal" bash -c '! grep -q "no measurement from" "$1"' _ "$work/out"
anyway=$(ls "$work"/anyway/throughput-Stand-in-GPU-*.md)
check "the results' header says the tests failed, with doctest's count" \
  grep -q "^- GPU tests: FAILED (test cases: 50 | 49 passed | 1 failed | 0 skipped): measured anyway" "$anyway"
check "the tables are marked as counting toward no goal" \
  grep -q "^\*\*The GPU tests failed on this build\*\*" "$anyway"
check "the run was measured all the same" grep -qE '"impl":"resnet_ddp",.*"status":"ok"' "$anyway"
mv "$work/build/tests/gpu_tests-passing" "$work/build/tests/gpu_tests"

# The measurement: our fused-BatchNorm NHWC variant with the legacy and with cuDNN's graph API,
# replayed from a graph, and eager PyTorch in both layouts, which has no GPU here.
expect 0 "results: .*/throughput-Stand-in-GPU-[0-9-]+\.md" -- \
  run --results-dir "$work/results" --with-nhwc --sizes 32 --precisions bf16 --budget 400 \
  --impls resnet_ddp-fusedbn-graphs,resnet_ddp-fusedbn-cudnngraph-graphs,pytorch-eager
results=$(ls "$work"/results/throughput-Stand-in-GPU-*.md)
log=${results%.md}.log
check "the results name the GPU, its driver, the commit and the passed GPU tests" \
  grep -qzE "GPU: Stand-in GPU, driver 999.99, compute capability 9.0.*commit test-commit.*GPU tests: passed" "$results"
check "the device's own view is kept" grep -q '"record":"device","gpu":"emulated CUDA device (CPU)"' "$results"
check "three runs of ours (fused in both layouts, the graph API in NHWC), measured" \
  bash -c '[ "$(grep "\"impl\":\"resnet_ddp" "$1" | grep -c "\"status\":\"ok\"")" = 3 ]' _ "$results"
check "the graph-API run says so and replayed its graph" \
  grep -qE '"impl":"resnet_ddp-fusedbn-cudnngraph-graphs".*"conv_api":"graph","conv_graph_plans":[1-9][0-9]*,"conv_legacy_algorithms":0,.*"graph_replays":[1-9]' "$results"
check "the table counts its convolutions on graph-API plans" \
  grep -qE "\| resnet_ddp-fusedbn-cudnngraph-graphs \(nhwc\) \| [1-9][0-9]* \| 0 \| [0-9.]+ \| none fell back \|" "$results"
fused=$(grep '"impl":"resnet_ddp-fusedbn-graphs".*"memory_format":"nhwc"' "$results")
check "the fused run ran in NHWC and replayed its graph" \
  grep -qE '"memory_format":"nhwc".*"graph_replays":[1-9]' <<<"$fused"
check "PyTorch's cells say why they hold no figure" \
  grep -qE '"impl": ?"pytorch-eager".*"status": ?"(SKIPPED: pytorch_ddp.py: torch.cuda.is_available\(\) is False|not run: no Python with torch)' "$results"
check "the tables were written, with our figure in the images/s table" \
  grep -qE '^\| 1 \| 32x32, cifar stem, 10 classes \| 4 \| adamw \| bf16 \|.* [0-9]+ \|' "$results"
check "the graph run's step is split too, by the events recorded inside its graph" \
  grep -qE '"split_ms":\{"data":[0-9.e+-]+,"forward_backward":[0-9.e+-]+,"comm_exposed":[0-9.e+-]+,"optimizer":[0-9.e+-]+,' <<<"$fused"
# PyTorch's runs are in the log where a Python with torch was found to run them.
torch_runs=0
! "$RDDP_SOURCE_DIR/scripts/find_python.sh" torch torchvision >/dev/null 2>&1 || torch_runs=2
check "the log holds every run's command and output" \
  bash -c '[ "$(grep -c "^### .*cuda_step_bench" "$1")" = 3 ] && [ "$(grep -c "^### .*pytorch_ddp.py" "$1")" = "$2" ] &&
           grep -q "^images/s per GPU" "$1"' _ "$log" "$torch_runs"

# --kernel-times: every run traces 10 more steps into a CSV, and the results end with each
# configuration's kernel time by category, the CSVs in a folder beside them.
expect 0 "results: .*/throughput-Stand-in-GPU-[0-9-]+\.md" -- \
  run --results-dir "$work/kernels" --with-nhwc --sizes 32 --precisions bf16 --budget 300 \
  --impls resnet_ddp-fusedbn-graphs --kernel-times
kernels=$(ls "$work"/kernels/throughput-Stand-in-GPU-*.md)
check "the run was asked for its kernels over 10 steps" \
  grep -qE "cuda_step_bench .*--kernel-csv .*/resnet_ddp-fusedbn-graphs-nhwc-32px-bf16\.csv --kernel-steps 10" \
  "${kernels%.md}.log"
check "the CSV is kept beside the results" test -s "${kernels%.md}-kernels/resnet_ddp-fusedbn-graphs-nhwc-32px-bf16.csv"
check "the results hold the configuration's kernel time by category" \
  grep -q "^### Kernel time per step by category, 32px, bf16 (10 traced steps a run)" "$kernels"
check "with the traced run's BatchNorm and convolutions per step (3 ms and 1 ms)" \
  grep -qE "^\| BatchNorm \| 3\.000 \(75\.0 %\) \|" "$kernels"
check "and its forward convolutions" grep -qE "^\| convolution forward \| 1\.000 \(25\.0 %\) \|" "$kernels"
check "the CSV is named in the report by its file" \
  grep -q "resnet_ddp-fusedbn-graphs-nhwc=resnet_ddp-fusedbn-graphs-nhwc-32px-bf16.csv\|resnet_ddp-fusedbn-graphs-nhwc-32px-bf16.csv" "$kernels"
# On the emulator the benchmark has no kernels to trace: it says so, and its figures stand.
expect 0 "kernel times +not collected: kernel times need CUPTI on a GPU" -- \
  "$RDDP_EMULATED_STEP_BENCH" --size 32 --batch 4 --classes 10 --warmup 2 --windows 1 \
  --steps-per-window 2 --conv-algorithms heuristic --kernel-csv "$work/none.csv"
check "its record says why there is no CSV" \
  grep -qE '"kernel_times_error":"kernel times need CUPTI on a GPU; this benchmark runs on the CUDA emulator"' "$work/out"
check "and it wrote none" test ! -e "$work/none.csv"

# On a V100 (the emulated benchmark's device described as one too), --precisions bf16 measures
# fp16, and the results say that bf16 was skipped and why, in the header and in bf16's row.
mkdir -p "$work/v100-run-bin"
cp "$work/v100-bin/nvidia-smi" "$work/v100-run-bin/"
PATH=$work/v100-run-bin:$work/bin:$PATH RDDP_COMMIT=test-commit RDDP_EMULATED_CC=7.0 \
  RDDP_EMULATED_GPU_NAME="Tesla V100-SXM2-32GB" RDDP_EMULATED_SMS=80 \
  expect 0 "results: .*/throughput-Tesla-V100-SXM2-32GB-[0-9-]+\.md" -- \
  "$script" --prebuilt --build-dir "$work/build" --results-dir "$work/v100" --sizes 32 \
  --precisions bf16 --impls resnet_ddp --budget 300
v100_results=$(ls "$work"/v100/throughput-Tesla-V100-SXM2-32GB-*.md)
check "the V100's results name fp16 as the precision measured" \
  grep -qxF -- "- precisions: fp16" "$v100_results"
check "and say why bf16 was skipped" grep -qxF -- \
  "  (bf16 skipped: Tesla V100-SXM2-32GB has compute capability 7.0, and bf16 needs 8.0 (bfloat16 tensor cores); fp16 measured in its place)" \
  "$v100_results"
check "fp16 was measured, against the V100's float16 tensor-core peak" \
  bash -c 'grep "\"impl\":\"resnet_ddp\"" "$1" | grep "\"precision\":\"fp16\"" | grep "\"status\":\"ok\"" |
           grep -q "\"peak_tflops\":125,"' _ "$v100_results"
check "bf16's row in the tables says why it holds no figure" \
  grep -qE "^\| 1 \| 32x32, cifar stem, 10 classes \| 128 \| adamw \| bf16 \|.*not run: bf16 needs compute capability 8.0 \(this GPU: 7.0\) \|" \
  "$v100_results"
check "no bf16 run was started" bash -c '! grep -q -- "--precision bf16" "$1"' _ "${v100_results%.md}.log"

# A budget too short for any run: every cell says so, and the command still writes its table.
expect 0 "left out, the budget is spent" -- \
  run --results-dir "$work/short" --sizes 32 --precisions bf16 --budget 20 --impls resnet_ddp
check "a run the budget left out says so in its cell" \
  grep -q '"status":"not run: time budget spent"' "$(ls "$work"/short/throughput-*.md)"
finish
