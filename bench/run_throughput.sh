#!/usr/bin/env bash
# Training throughput on this machine's GPU, resnet_ddp against PyTorch, in one command:
#
#   bench/run_throughput.sh [--dry-run] [--skip-tests] [--budget SECONDS] [--results-dir DIR]
#                           [--build-dir DIR] [--prebuilt] [--with-nhwc] [--grad-allreduce fp32|bf16]
#                           [--impls LIST] [--precisions LIST] [--sizes LIST]
#                           [--compile-limit SECONDS] [--goals] [--measure-despite-failed-tests]
#                           [--kernel-times]
#
# 1. Builds the benchmark and the GPU tests into build/ for the local GPU's architecture
#    (nvidia-smi's compute capability; an existing build that includes it is kept).
#    --prebuilt uses the programs already in the build directory as they are, with no CMake:
#    for a build made on another machine and copied here, whose CMake cache names paths that
#    do not exist here.
# 2. Runs the GPU tests (ctest -L gpu) and stops unless they pass: figures from a program that
#    computes wrongly are worthless. --skip-tests leaves them out, for a rerun of the same build.
# 3. Measures every configuration
#      32x32 images, cifar stem, 10 classes, batch 128: 20 warm-up steps, 5 windows of 50
#      224x224 images, imagenet stem, 1000 classes, batch 256: 10 warm-up steps, 5 windows of 20
#    in tf32, fp32, bf16 and fp16 (autocast's mixed precision on both sides; fp16 with
#    GradScaler's dynamic loss scaling; on a GPU below compute capability 8.0, such as a V100,
#    bf16 is skipped, saying so in the output and the results, and fp16 runs where bf16 was
#    asked for), AdamW, with resnet_ddp (bench/cuda_step_bench; NCHW
#    activations, and with --with-nhwc under tf32, bf16 and fp16 also NHWC: with cuDNN's
#    BatchNorm it measured far slower on an H100), PyTorch eager and PyTorch torch.compile
#    (bench/pytorch_ddp.py, with $RDDP_PYTHON or the first python3 whose torch sees the GPU); first
#    resnet_ddp and eager for every configuration, then the compiled runs, which spend most of
#    their time compiling, so that the main comparison comes first. Precisions run in the order
#    tf32, bf16, fp32, fp16, so that a budget too short for all leaves out the last.
# 4. Writes DIR/throughput-<gpu>-<date>.md: GPU, driver, CUDA, cuDNN, NCCL and PyTorch versions,
#    date, commit, the tables of bench/compare_throughput.py and the raw JSON lines; and beside it
#    a .log with every run's own output. DIR is --results-dir, or this run's folder
#    bench/results/<date>-<gpu>-<commit> (scripts/results_folder.sh names it).
#
# resnet_ddp also runs every configuration with --cuda-graphs on (column resnet_ddp-graphs: the
# step captured once and replayed as a CUDA graph, with the reducer's allreduces under
# --grad-allreduce), so that one run measures what the graph saves in launch overhead. Likewise with --batchnorm fused (columns resnet_ddp-fusedbn and
# resnet_ddp-fusedbn-graphs): our BatchNorm kernels with ReLU and the residual add folded in,
# against cuDNN's BatchNorm in the plain columns.
#
# --impls LIST (comma-separated) measures only those columns: resnet_ddp, resnet_ddp-fusedbn,
# resnet_ddp-graphs, resnet_ddp-fusedbn-graphs, pytorch-eager, pytorch-compile (all by default),
# and, only when named, resnet_ddp-floatinput (batches uploaded as normalised floats rather than
# uint8 pixels) and resnet_ddp-fusedbn-cudnngraph and resnet_ddp-fusedbn-cudnngraph-graphs (nhwc
# only: the convolutions through cuDNN's graph API, --conv-api graph), so that a machine lent for
# 10 minutes a command can measure them in two commands, each writing its own results file;
# `bench/compare_throughput.py A.md B.md` merges their tables (a measurement in one wins over
# "not run" in the other). --precisions LIST (tf32, bf16, fp32, fp16) and --sizes LIST (32, 224)
# narrow the configurations the same way.
#
# --grad-allreduce TYPE runs every configuration with DDP in a world of one (--ddp on both sides)
# and its gradients sent as TYPE (bf16: our reducer's bfloat16 buckets against DDP's
# bf16_compress_hook). Sending half the bytes only pays with several GPUs; on this one GPU the
# rows show what the casts cost. Without it, both sides train as one process with no reducer.
#
# --goals measures only what the goals need (bench/results/README.md: at least 1.3x PyTorch
# eager, ahead of torch.compile, peak memory no higher), in as few minutes as that allows: for
# bf16 and then tf32, at 224x224 and then 32x32, one configuration complete before the next
# (our likeliest-fastest variants, all replayed from a graph: fused BatchNorm in NHWC, with the
# legacy and with the graph API's convolutions, fused and cuDNN's BatchNorm in NCHW; then eager
# PyTorch in both layouts and torch.compile), so that a
# budget cut leaves whole configurations with a verdict each. By the run times of 2026-11-22 on an
# H100, about 9 to 10 minutes with the GPU tests (about 100 s of them), so --budget 540 may leave
# out the last runs of tf32 at 32x32. --sizes and --precisions narrow it; --impls and --with-nhwc
# do not go with it.
#
# --measure-despite-failed-tests measures even when the GPU tests fail, and says so in the
# results' header and above its tables: for a machine lent once for a few minutes, where the
# failing test and the figures are both worth taking home. Without it a failure stops the run.
#
# --kernel-times has every run trace 10 more steps after its timed ones, each kernel's time summed
# by name (cuda_step_bench and pytorch_ddp.py --kernel-csv: CUPTI, through torch.profiler on
# PyTorch's side; no profiler to install), and the results then end with the kernel time per step
# by category for each configuration, every run side by side against torch.compile
# (bench/profile_breakdown.py), the CSVs in a folder beside them: where a step's time goes, from
# the same runs, for a second or two each.
#
# Time: each run has a limit (resnet_ddp and eager 150 s, compile 150 s or --compile-limit) and
# the whole script a budget (--budget, 480 s from its start, about 8 minutes): a run starts only
# while 30 s are left and never outlives the budget; runs left out say so in the tables. On an H100 the
# measurements take about 5 minutes, most of it torch.compile; the build and the GPU tests come
# on top. Without a GPU it prints SKIPPED and exits 0. --dry-run prints the commands instead of
# running them and checks, without a GPU, that both sides count the same model.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

dry_run=0 skip_tests=0 prebuilt=0 with_nhwc=0 budget=480 grad_allreduce="" limit_compile=150
goals=0 tests_advisory=0 impls_given=0 precisions_given=0 kernel_times=0
# Steps each run traces for --kernel-times.
kernel_steps=10
all_impls=resnet_ddp,resnet_ddp-fusedbn,resnet_ddp-graphs,resnet_ddp-fusedbn-graphs,pytorch-eager,pytorch-compile
chosen_impls=$all_impls
known_impls=$all_impls,resnet_ddp-floatinput
known_impls+=,resnet_ddp-fusedbn-cudnngraph,resnet_ddp-fusedbn-cudnngraph-graphs
all_precisions=tf32,bf16,fp32,fp16 chosen_precisions=tf32,bf16,fp32,fp16
all_sizes=32,224 chosen_sizes=32,224
results_dir="" build=$root/build
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry_run=1 ;;
    --skip-tests) skip_tests=1 ;;
    --prebuilt) prebuilt=1 ;;
    --with-nhwc) with_nhwc=1 ;;
    --budget) budget=${2:?--budget needs a number of seconds}; shift ;;
    --results-dir) results_dir=${2:?--results-dir needs a directory}; shift ;;
    --build-dir) build=${2:?--build-dir needs a directory}; shift ;;
    --grad-allreduce) grad_allreduce=${2:?--grad-allreduce needs fp32 or bf16}; shift ;;
    --impls) chosen_impls=${2:?--impls needs a comma-separated list}; impls_given=1; shift ;;
    --goals) goals=1 ;;
    --measure-despite-failed-tests) tests_advisory=1 ;;
    --kernel-times) kernel_times=1 ;;
    --precisions) chosen_precisions=${2:?--precisions needs a comma-separated list}; precisions_given=1; shift ;;
    --sizes) chosen_sizes=${2:?--sizes needs a comma-separated list}; shift ;;
    --compile-limit) limit_compile=${2:?--compile-limit needs a number of seconds}; shift ;;
    *) echo "run_throughput.sh: unknown argument '$1'; see the comment at the top of $0" >&2
       exit 2 ;;
  esac
  shift
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "run_throughput.sh: --budget needs whole seconds, got '$budget'" >&2; exit 2; }
[[ $limit_compile =~ ^[1-9][0-9]*$ ]] ||
  { echo "run_throughput.sh: --compile-limit needs whole seconds, got '$limit_compile'" >&2; exit 2; }
for impl in ${chosen_impls//,/ }; do
  [[ ,$known_impls, == *",$impl,"* ]] ||
    { echo "run_throughput.sh: --impls: '$impl' is not one of $known_impls" >&2; exit 2; }
done
for precision in ${chosen_precisions//,/ }; do
  [[ ,$all_precisions, == *",$precision,"* ]] ||
    { echo "run_throughput.sh: --precisions: '$precision' is not one of $all_precisions" >&2; exit 2; }
done
for size in ${chosen_sizes//,/ }; do
  [[ ,$all_sizes, == *",$size,"* ]] ||
    { echo "run_throughput.sh: --sizes: '$size' is not one of $all_sizes" >&2; exit 2; }
done
if [ $goals = 1 ]; then
  [ $impls_given = 0 ] && [ $with_nhwc = 0 ] ||
    { echo "run_throughput.sh: --goals chooses its own runs (both layouts); leave out --impls and --with-nhwc" >&2; exit 2; }
  [ $precisions_given = 1 ] || chosen_precisions=tf32,bf16
  [[ ,$chosen_precisions, != *,fp32,* && ,$chosen_precisions, != *,fp16,* ]] ||
    { echo "run_throughput.sh: --goals measures tf32 and bf16 only; --precisions may narrow it to one of them" >&2; exit 2; }
fi
wanted() { [[ ,$chosen_impls, == *",$1,"* ]]; }
case $grad_allreduce in
  "") ddp_flags=() ;;
  fp32|bf16) ddp_flags=(--ddp --grad-allreduce "$grad_allreduce") ;;
  *) echo "run_throughput.sh: --grad-allreduce must be fp32 or bf16, got '$grad_allreduce'" >&2; exit 2 ;;
esac

# Configurations: stem size batch classes warm-up windows steps-per-window. Small images make
# short steps, so their windows hold more of them.
configs=()
for config in "cifar 32 128 10 20 5 50" "imagenet 224 256 1000 10 5 20"; do
  read -r _ size _ <<<"$config"
  [[ ,$chosen_sizes, != *",$size,"* ]] || configs+=("$config")
done
precisions=()
precision_order="tf32 bf16 fp32 fp16"
if [ $goals = 1 ]; then
  # The mixed-precision verdicts first, and the ImageNet case before the CIFAR one: a budget
  # that ends early leaves out the configurations least asked about.
  precision_order="bf16 tf32"
  reversed=()
  for ((i = ${#configs[@]} - 1; i >= 0; i--)); do reversed+=("${configs[i]}"); done
  configs=("${reversed[@]}")
fi
for precision in $precision_order; do
  [[ ,$chosen_precisions, != *",$precision,"* ]] || precisions+=("$precision")
done
# resnet_ddp's activation layouts by precision: NHWC only on request (--with-nhwc), and only
# for the tensor-core precisions, whose kernels read NHWC natively (strict fp32's do not).
formats_of() {
  case $with_nhwc-$1 in 1-tf32 | 1-bf16 | 1-fp16) echo "nchw nhwc" ;; *) echo nchw ;; esac
}
# A compiled run took 36 to 45 s on an H100, but the 224 px fp32 one was still compiling after
# 300 s: a longer limit only lets one such run eat the budget of the others. That one gets a
# command of its own: --impls pytorch-compile --sizes 224 --precisions fp32 --compile-limit 540
# --budget 570.
limit_ours=150 limit_eager=150
min_left=30

left() { echo $((budget - SECONDS)); }
say() { echo "== $*" >&2; }

# --- the GPU -------------------------------------------------------------------------------
gpu_name="" driver="" compute_cap="" arch=""
if gpu_lines=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null) &&
   [ -n "$gpu_lines" ]; then
  # The first GPU, which the single-process runs use.
  IFS=, read -r gpu_name driver compute_cap <<<"${gpu_lines%%$'\n'*}"
  gpu_name=$(echo "$gpu_name" | xargs) driver=$(echo "$driver" | xargs)
  compute_cap=$(echo "$compute_cap" | xargs) arch=${compute_cap//./}
elif [ $dry_run = 1 ]; then
  gpu_name="(no GPU here)" compute_cap=9.0 arch=90
  say "no GPU answers nvidia-smi; the dry run assumes compute capability 9.0"
else
  echo "SKIPPED: run_throughput.sh: no GPU answers (nvidia-smi lists none or is missing)"
  exit 0
fi

# RDDP_COMMIT names it where the tree is a copy without its git history.
if [ -n "${RDDP_COMMIT:-}" ]; then
  commit=$RDDP_COMMIT
else
  commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
  git -C "$root" diff --quiet HEAD 2>/dev/null || commit+=" (with uncommitted changes)"
fi
[ -n "$results_dir" ] ||
  results_dir=$here/results/$("$root/scripts/results_folder.sh" "$gpu_name" "$commit")
say "results go to $results_dir"
# --- the precisions this GPU has ------------------------------------------------------------
# bf16 needs bfloat16 tensor cores (compute capability 8.0: A100 on), and resnet_ddp refuses it
# below; fp16 is the mixed precision such a GPU (a V100) has, so it runs where bf16 was asked
# for. tf32 there computes in plain float32 (no TF32 units), which the results say.
precision_notes=() bf16_skipped=""
cc_major=${compute_cap%%.*}
if [[ $cc_major =~ ^[0-9]+$ ]] && [ "$cc_major" -lt 8 ]; then
  if [[ " ${precisions[*]} " == *" bf16 "* ]]; then
    kept=() instead="fp16 is measured as well"
    for precision in "${precisions[@]}"; do
      if [ "$precision" != bf16 ]; then
        kept+=("$precision")
      elif [[ " ${precisions[*]} " != *" fp16 "* ]]; then
        kept+=(fp16) instead="fp16 measured in its place"
      fi
    done
    precisions=("${kept[@]}")
    # Short enough for a table cell (compare_throughput.py cuts a status at 60 characters).
    bf16_skipped="not run: bf16 needs compute capability 8.0 (this GPU: $compute_cap)"
    precision_notes+=("bf16 skipped: $gpu_name has compute capability $compute_cap, and bf16 needs 8.0 (bfloat16 tensor cores); $instead")
  fi
  [[ " ${precisions[*]} " != *" tf32 "* ]] ||
    precision_notes+=("tf32 computes in plain float32 on compute capability $compute_cap (no TF32 units)")
fi
for note in ${precision_notes[@]+"${precision_notes[@]}"}; do say "$note"; done

# A Python whose torch sees the GPU; else any with torch and torchvision, whose runs will say
# why they measured nothing (and which still counts the model for the check below).
python=""
for candidate in ${RDDP_PYTHON:-} "$(command -v python3 || true)" /usr/bin/python3; do
  if [ -z "$candidate" ] || [ ! -x "$candidate" ]; then continue; fi
  if "$candidate" -c 'import sys, torch, torchvision; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    python=$candidate
    break
  fi
done
[ -n "$python" ] || python=$("$root/scripts/find_python.sh" torch torchvision 2>/dev/null) || python=""
[ -n "$python" ] || say "no Python with torch and torchvision: the PyTorch rows will say so"
table_python=${python:-$(command -v python3)}

# Prints a command, quoted so that it can be pasted.
show() { printf '%q ' "$@"; echo; }
# Runs a command (or, in a dry run, prints it) with a time limit of at most what the budget has
# left; status 124 when the limit ends it.
limited() {
  local limit=$1; shift
  local now_left; now_left=$(left)
  [ "$limit" -le "$now_left" ] || limit=$now_left
  # `timeout 0` would mean no limit at all.
  [ "$limit" -ge 1 ] || { echo "run_throughput.sh: the budget is spent: $(show "$@")" >&2; return 124; }
  if [ $dry_run = 1 ]; then
    echo "timeout ${limit}s: $(show "$@")"
    return 0
  fi
  timeout --signal=TERM --kill-after=15 "$limit" "$@"
}

# --- build --------------------------------------------------------------------------------
if [ $prebuilt = 1 ]; then
  for program in bench/cuda_step_bench tests/gpu_tests; do
    [ -x "$build/$program" ] || [ $dry_run = 1 ] ||
      { echo "run_throughput.sh: --prebuilt, but there is no $build/$program: build it first" >&2; exit 1; }
  done
  say "using the programs built in $build as they are (--prebuilt)"
else
  cached_archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
  configure=(cmake -S "$root" -B "$build")
  if [[ ";$cached_archs;" != *";$arch;"* ]]; then
    configure+=("-DCMAKE_CUDA_ARCHITECTURES=$arch")
  fi
  say "build for compute capability $arch into $build"
  # Only what the measurement and the gpu-labelled tests run (nccl_comm_test exists when an
  # mpiexec was found).
  targets=(cuda_step_bench gpu_tests)
  build_ok=1
  limited "$(left)" "${configure[@]}" || build_ok=0
  if [ $build_ok = 1 ]; then
    # Into a variable first: grep -q would stop reading early, and the build tool's broken pipe
    # would fail the pipeline.
    known_targets=$(cmake --build "$build" --target help 2>/dev/null || true)
    if grep -qw nccl_comm_test <<<"$known_targets"; then targets+=(nccl_comm_test); fi
  fi
  if [ $build_ok = 0 ] ||
     ! limited "$(left)" cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"; then
    echo "run_throughput.sh: the build failed or ran past the budget (output above)" >&2
    exit 1
  fi
fi
bench_program=$build/bench/cuda_step_bench

# --- GPU tests ------------------------------------------------------------------------------
tests_line="passed (ctest -L gpu)"
if [ $skip_tests = 1 ]; then
  tests_line="not run (--skip-tests)"
  say "GPU tests skipped (--skip-tests)"
else
  say "GPU tests"
  test_log=$(mktemp)
  tests_ok=1
  # As scripts/gpu_check.sh's tests part allows: they took 290 s on an H100 on 2026-11-27, and
  # cases were added since. A shorter run costs nothing of the limit.
  tests_limit=400
  if [ $prebuilt = 1 ]; then
    # No CMake tree to ask: the GPU test program itself, which exits 77 when it finds no GPU.
    limited $tests_limit "$root/scripts/run_gpu_tests.sh" "$build/tests/gpu_tests" 2>&1 |
      tee "$test_log" || tests_ok=0
  else
    limited $tests_limit ctest --test-dir "$build" -L gpu --output-on-failure 2>&1 |
      tee "$test_log" || tests_ok=0
  fi
  if [ $tests_ok = 0 ] && [ $tests_advisory = 1 ]; then
    # doctest's summary line names how many cases failed; the log above has which.
    summary=$(grep -E '^\[doctest\] test cases:' "$test_log" | tail -1 | sed 's/^\[doctest\] //' || true)
    tests_line="FAILED${summary:+ ($summary)}: measured anyway (--measure-despite-failed-tests); a figure of a path a failing test covers is not to be trusted"
    say "the GPU tests failed or ran out of time; measuring anyway (--measure-despite-failed-tests)"
    tests_ok=1
  elif [ $tests_ok = 0 ]; then
    echo "run_throughput.sh: the GPU tests failed or ran out of time; no measurement from a program that computes wrongly (output above)" >&2
  elif [ $dry_run = 0 ] && grep -qE 'did not run|No tests were found' "$test_log"; then
    # Tests that never ran say nothing of the GPU; measuring anyway would not either.
    echo "run_throughput.sh: nvidia-smi lists $gpu_name but the GPU tests did not run (output above): fix that first" >&2
    tests_ok=0
  fi
  rm -f "$test_log"
  [ $tests_ok = 1 ] || exit 1
fi

# --- the same model on both sides -----------------------------------------------------------
# Counting needs no GPU; a mismatch means the two sides would train different networks.
check_models() {
  if [ ! -x "$bench_program" ] || [ -z "$python" ]; then
    say "model check left out: no $bench_program or no PyTorch"
    return 0
  fi
  local records config stem size batch classes
  records=$(mktemp)
  for config in "${configs[@]}"; do
    read -r stem size batch classes _ <<<"$config"
    local flags=(--stem "$stem" --size "$size" --batch "$batch" --classes "$classes")
    "$bench_program" --describe "${flags[@]}" >>"$records"
    "$python" "$here/pytorch_ddp.py" --describe "${flags[@]}" >>"$records"
  done
  "$table_python" "$here/compare_throughput.py" --check "$records" >&2 || { rm -f "$records"; return 1; }
  rm -f "$records"
}
check_models || { echo "run_throughput.sh: resnet_ddp and PyTorch count different models; see above" >&2; exit 1; }

# --- measurements ---------------------------------------------------------------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
raw=$work/raw.jsonl log=$work/runs.log kernels_dir=$work/kernels
: >"$raw"
: >"$log"
mkdir -p "$kernels_dir"

json_escape() {
  local text=${1//\\/\\\\}
  text=${text//\"/\\\"}
  printf '%s' "$text" | tr -d '\000-\037'
}

# A record for a run that measured nothing, so that its cell says why. $format is the
# memory format of the run being recorded (set by measure).
status_record() {
  local impl=$1 stem=$2 size=$3 batch=$4 classes=$5 precision=$6 status=$7
  printf '{"record":"throughput","impl":"%s","status":"%s","gpu":"%s","world_size":1,"ddp":%s,"stem":"%s","image_size":%s,"batch_per_gpu":%s,"classes":%s,"optimizer":"adamw","precision":"%s","memory_format":"%s"}\n' \
    "$impl" "$(json_escape "$status")" "$(json_escape "$gpu_name")" "$([ -n "$grad_allreduce" ] && echo true || echo false)" "$stem" "$size" "$batch" "$classes" "$precision" "${format:-nchw}" >>"$raw"
}

# measure IMPL LIMIT STEM SIZE BATCH CLASSES PRECISION WARMUP WINDOWS STEPS [FORMAT]
# FORMAT (default nchw) is resnet_ddp's --memory-format; nhwc gives PyTorch --channels-last.
measure() {
  local impl=$1 limit=$2 stem=$3 size=$4 batch=$5 classes=$6 precision=$7 format=${11:-nchw}
  local flags=(--stem "$stem" --size "$size" --batch "$batch" --classes "$classes"
               --optimizer adamw --precision "$precision" --warmup "$8" --windows "$9"
               --steps-per-window "${10}" ${ddp_flags[@]+"${ddp_flags[@]}"})
  local command
  case $impl in
    resnet_ddp) command=("$bench_program" "${flags[@]}" --memory-format "$format") ;;
    resnet_ddp-graphs) command=("$bench_program" "${flags[@]}" --memory-format "$format" --cuda-graphs on) ;;
    resnet_ddp-floatinput) command=("$bench_program" "${flags[@]}" --memory-format "$format" --input float) ;;
    resnet_ddp-fusedbn) command=("$bench_program" "${flags[@]}" --memory-format "$format" --batchnorm fused) ;;
    resnet_ddp-fusedbn-graphs)
      command=("$bench_program" "${flags[@]}" --memory-format "$format" --batchnorm fused --cuda-graphs on) ;;
    resnet_ddp-fusedbn-cudnngraph)
      command=("$bench_program" "${flags[@]}" --memory-format "$format" --batchnorm fused
               --conv-api graph) ;;
    resnet_ddp-fusedbn-cudnngraph-graphs)
      command=("$bench_program" "${flags[@]}" --memory-format "$format" --batchnorm fused
               --conv-api graph --cuda-graphs on) ;;
    pytorch-*)
      if [ -z "$python" ]; then
        status_record "$impl" "$stem" "$size" "$batch" "$classes" "$precision" "not run: no Python with torch and torchvision"
        return 0
      fi
      command=("$python" "$here/pytorch_ddp.py" --mode "${impl#pytorch-}" "${flags[@]}")
      # PyTorch's name for the same layout, as its records say.
      if [ "$format" = nhwc ]; then command+=(--channels-last) format=channels_last; fi ;;
  esac
  if [ $kernel_times = 1 ]; then
    local kernel_csv="$kernels_dir/$impl-$format-${size}px-$precision.csv"
    command+=(--kernel-csv "$kernel_csv" --kernel-steps "$kernel_steps")
  fi
  if [ "$(left)" -lt $min_left ]; then
    say "$impl $size px $precision $format: left out, the budget is spent"
    status_record "$impl" "$stem" "$size" "$batch" "$classes" "$precision" "not run: time budget spent"
    return 0
  fi
  say "$impl, ${size}x$size, batch $batch, $precision, $format ($(left) s of the budget left)"
  if [ $dry_run = 1 ]; then
    limited "$limit" "${command[@]}"
    return 0
  fi
  local out=$work/run.out err=$work/run.err rc=0
  local started=$SECONDS
  limited "$limit" "${command[@]}" >"$out" 2>"$err" || rc=$?
  { echo "### $(show "${command[@]}")"; echo "(exit status $rc after $((SECONDS - started)) s)"
    cat "$out" "$err"; echo; } >>"$log"
  local record; record=$(grep -E '^\{"record": ?"throughput"' "$out" | tail -1 || true)
  if [ $rc = 0 ] && [ -n "$record" ]; then
    echo "$record" >>"$raw"
    grep -E '^images/s per GPU' "$out" >&2 || true
    return 0
  fi
  local why
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    why="timed out after $limit s"
  elif grep -q 'not implemented yet' "$err"; then
    why="not implemented yet"
  elif grep -q '^SKIPPED' "$out"; then
    why=$(grep '^SKIPPED' "$out" | head -1)
  else
    why="failed (exit status $rc): $(grep -v '^\s*$' "$err" | tail -1 | cut -c1-160)"
  fi
  say "  $why"
  status_record "$impl" "$stem" "$size" "$batch" "$classes" "$precision" "$why"
}

# The skipped bf16 runs keep their rows in the tables, saying why.
if [ -n "$bf16_skipped" ]; then
  for config in "${configs[@]}"; do
    read -r stem size batch classes _ <<<"$config"
    status_record resnet_ddp "$stem" "$size" "$batch" "$classes" bf16 "$bf16_skipped"
  done
fi

device_info=""
if [ $dry_run = 1 ]; then
  show "$bench_program" --device-info
else
  device_info=$(limited 60 "$bench_program" --device-info) || device_info=""
  grep -E '^\{"record": ?"device"' <<<"$device_info" >>"$raw" || true
fi

# The runs of --goals for one configuration, as "IMPL FORMAT" lines: ours replayed from a graph
# (every replayed step measured faster than the same step eager), the variants likeliest to be
# fastest first; then PyTorch's.
goal_runs() {
  echo "resnet_ddp-fusedbn-cudnngraph-graphs nhwc"
  echo "resnet_ddp-fusedbn-graphs nhwc"
  echo "resnet_ddp-fusedbn-graphs nchw"
  echo "resnet_ddp-graphs nchw"
  echo "pytorch-eager nchw"
  echo "pytorch-eager nhwc"
  echo "pytorch-compile nchw"
}
# A run's time limit by what it runs (the variants of resnet_ddp share one).
limit_of() {
  case $1 in
    pytorch-eager) echo $limit_eager ;;
    pytorch-compile) echo "$limit_compile" ;;
    *) echo $limit_ours ;;
  esac
}
if [ $goals = 1 ]; then
  for precision in "${precisions[@]}"; do
    for config in "${configs[@]}"; do
      read -r stem size batch classes warmup windows steps <<<"$config"
      # Into an array first: a program measured inside the loop must not read its list.
      mapfile -t runs < <(goal_runs "$size" "$precision")
      for run in "${runs[@]}"; do
        read -r impl format <<<"$run"
        measure "$impl" "$(limit_of "$impl")" "$stem" "$size" "$batch" "$classes" "$precision" \
          "$warmup" "$windows" "$steps" "$format"
      done
    done
  done
fi
[ $goals = 1 ] ||
for impls in "resnet_ddp pytorch-eager" "pytorch-compile"; do
  for config in "${configs[@]}"; do
    read -r stem size batch classes warmup windows steps <<<"$config"
    for precision in "${precisions[@]}"; do
      for impl in $impls; do
        limit=$(limit_of "$impl")
        if [ "$impl" = resnet_ddp ]; then
          for format in $(formats_of "$precision"); do
            variants=(resnet_ddp resnet_ddp-fusedbn resnet_ddp-floatinput)
            variants+=(resnet_ddp-graphs resnet_ddp-fusedbn-graphs)
            [ "$format" != nhwc ] ||
              variants+=(resnet_ddp-fusedbn-cudnngraph resnet_ddp-fusedbn-cudnngraph-graphs)
            for variant in "${variants[@]}"; do
              wanted "$variant" || continue
              measure "$variant" "$limit" "$stem" "$size" "$batch" "$classes" "$precision" \
                "$warmup" "$windows" "$steps" "$format"
            done
          done
        elif wanted "$impl"; then
          # Eager PyTorch in channels_last too wherever resnet_ddp runs NHWC: the layout is
          # PyTorch's to use as much as ours. torch.compile picks its own layout.
          formats=nchw
          [ "$impl" != pytorch-eager ] || formats=$(formats_of "$precision")
          for format in $formats; do
            measure "$impl" "$limit" "$stem" "$size" "$batch" "$classes" "$precision" \
              "$warmup" "$windows" "$steps" "$format"
          done
        fi
      done
    done
  done
done
[ $dry_run = 0 ] || exit 0

# --- results --------------------------------------------------------------------------------

# Each configuration's traced kernels, every run of it against torch.compile's, by category; the
# CSVs go beside the results.
kernel_breakdowns() {
  local kept=${results%.md}-kernels config csvs name
  for config in $(ls "$kernels_dir" 2>/dev/null | sed -n 's/.*-\([0-9]*px-[a-z0-9]*\)\.csv$/\1/p' | sort -u); do
    csvs=()
    for csv in "$kernels_dir"/*-"$config".csv; do
      name=$(basename "$csv" "-$config.csv")
      csvs+=("$name=$(basename "$csv")")
    done
    mkdir -p "$kept"
    cp "$kernels_dir"/*-"$config".csv "$kept/"
    local baseline=()
    [ ! -e "$kernels_dir/pytorch-compile-nchw-$config.csv" ] || baseline=(--baseline pytorch-compile-nchw)
    echo "### Kernel time per step by category, ${config/-/, } ($kernel_steps traced steps a run)"
    echo
    # In the CSVs' folder, so that the report names them by file; its headings one level down.
    (cd "$kept" && "$table_python" "$here/profile_breakdown.py" --steps "$kernel_steps" \
       ${baseline[@]+"${baseline[@]}"} --top 3 "${csvs[@]}") | sed '1,/^$/d; s/^#/###/' ||
      echo "(profile_breakdown.py could not read them)"
    echo
  done
}

mkdir -p "$results_dir"
gpu_tag=$(echo "$gpu_name" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/^-//; s/-$//')
stamp=$(date -u +%Y-%m-%d)
[ ! -e "$results_dir/throughput-$gpu_tag-$stamp.md" ] || stamp=$(date -u +%Y-%m-%d-%H%M%S)
results=$results_dir/throughput-$gpu_tag-$stamp.md
nvcc_version=$(grep -hs 'set(CMAKE_CUDA_COMPILER_VERSION ' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake |
  head -1 | grep -oE '[0-9][0-9.]*' || echo unknown)
torch_versions="no PyTorch"
if [ -n "$python" ]; then
  torch_versions=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import pytorch_ddp
print(", ".join(f"{name} {version}" for name, version in pytorch_ddp.versions().items()))' "$here" 2>/dev/null) ||
    torch_versions="unknown"
fi
{
  echo "# Training throughput on $gpu_name, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- GPU: $gpu_name, driver $driver, compute capability $compute_cap"
  echo "- resnet_ddp: commit $commit, built with nvcc $nvcc_version"
  echo "- PyTorch: $torch_versions"
  echo "- host: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  echo "- GPU tests: $tests_line"
  echo "- precisions: ${precisions[*]}"
  for note in ${precision_notes[@]+"${precision_notes[@]}"}; do echo "  ($note)"; done
  echo "- synthetic data; resnet_ddp copies its batch from pinned host memory every step, PyTorch keeps it on the device;"
  if [ -n "$grad_allreduce" ]; then
    echo "  AdamW; DDP in a world of one, gradients allreduced as $grad_allreduce (only W > 1 gains from bf16's halved bytes);"
    echo "  timed convolution algorithms (cudnn.benchmark); steps per configuration:"
  else
    echo "  AdamW; one process, no DDP; timed convolution algorithms (cudnn.benchmark); steps per configuration:"
  fi
  for config in "${configs[@]}"; do
    read -r stem size batch classes warmup windows steps <<<"$config"
    echo "  ${size}x$size: $warmup warm-up steps, then $windows windows of $steps, median window"
  done
  echo "- FLOPs per image: 3 x 2 x forward MACs of the convolutions and fc (both sides count the same)"
  echo
  echo "resnet_ddp's view of the device (\`cuda_step_bench --device-info\`):"
  echo
  echo '```'
  echo "${device_info:-cuda_step_bench --device-info gave nothing}"
  echo '```'
  echo
  if [[ $tests_line == FAILED* ]]; then
    echo "**The GPU tests failed on this build** (the log has their output): every table below is of"
    echo "a program that computes wrongly somewhere, and counts toward no goal until they pass."
    echo
  fi
  "$table_python" "$here/compare_throughput.py" "$raw" || true
  [ $kernel_times = 0 ] || kernel_breakdowns
  echo "### Raw records"
  echo
  echo '```'
  cat "$raw"
  echo '```'
} >"$results"
cp "$log" "${results%.md}.log"
say "results: $results (every run's output: ${results%.md}.log)"
