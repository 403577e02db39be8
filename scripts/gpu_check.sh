#!/usr/bin/env bash
# Runs everything that needs a GPU, on a machine that has one and a built tree (cmake --build
# build), in parts that each end within a budget (520 s, under 9 minutes; the throughput part
# 530 s), so that a machine lent for 10 minutes a command can run them one command at a time:
#
#   scripts/gpu_check.sh                   every part, one after the other
#   scripts/gpu_check.sh --part precision  one part (by name or number; repeat --part, or give
#                                          a comma list: --part 1,engine)
#   scripts/gpu_check.sh --part 1,7,4 --budget 560
#                                          several parts in one command that must end within
#                                          560 s: every step's limit is cut to what is left of
#                                          the command's budget as well as of its part's
#   scripts/gpu_check.sh --list            the parts, their budgets and what they check
#   scripts/gpu_check.sh --dry-run [...]   print each part's commands and limits, run nothing
#                                          (needs neither a GPU nor a build)
#
# The parts (--list says the same):
#   1 tests       the gpu tests (every CUDA layer and kernel against its CPU twin, the whole net
#                 against the CPU executor, bf16, fp16 and NHWC) and the NCCL communicator tests
#   2 fashion     Fashion-MNIST for 5 epochs (cosine schedule) on the GPU and the same recipe in
#                 PyTorch on the same GPU (bench/pytorch_recipe.py): the same rates, each epoch's
#                 training loss within 5 % and the final accuracies within half a point
#   3 precision   Fashion-MNIST for 3 epochs (cosine schedule) in fp32, tf32, bf16 and fp16, each
#                 with --log-json; scripts/plot_precision_curves.py overlays the curves in a PNG
#                 and judges them: final accuracy within 1 point, final loss within 20 % of fp32
#   4 engine      resume with deterministic algorithms (k + resume + k steps bit-identical to 2k),
#                 the 2k steps with --cuda-graphs on bit-identical too,
#                 a plain run and mpirun -np 1 through NCCL, also with a bfloat16 gradient allreduce,
#                 and parity.test_training_run on the GPU: a whole fp32 run, step by step, against
#                 PyTorch's on the CPU
#   5 mixed       300 steps of synthetic data in bf16 and fp16, NCHW and NHWC, cuDNN's and our
#                 fused BatchNorm each: the run ends 0 and fp16 reports its skipped steps
#   6 data        a folder of ImageNet-like JPEGs (bench/make_jpegs.py), packed with
#                 resnet_ddp_pack; 3 epochs from the folder and from the pack with the fastest
#                 flags (the GPU at its fastest is the hardest to feed), and the data-wait
#                 share of every epoch side by side
#   7 kernels     bench/kernels_bench: bandwidth of our kernels, and our BatchNorm (plain, and
#                 with residual + ReLU) beside cuDNN's at every BatchNorm shape of ResNet-18 (32x32 batch 128, 224x224 batch 256;
#                 NCHW and NHWC; fp32 and bf16); then every convolution of the 224x224 network
#                 in NHWC (bf16, tf32) through cuDNN's legacy API and its graph API
#                 (--conv-api), and their sums per training step; the whole table in
#                 <report>-kernels.txt. Then the same convolutions as PyTorch runs them
#                 (bench/pytorch_convs.py: cudnn.benchmark, channels_last), beside ours, in
#                 <report>-convs.md
#   8 sanitize    compute-sanitizer's memcheck, racecheck and synccheck over the gpu tests of our
#                 kernels (test_kernels.cu, test_cuda_batchnorm_kernels.cpp), checking only our
#                 kernels (namespace rddp): out-of-bounds and misaligned accesses, shared-memory
#                 races, barriers not every thread reaches. Skipped, saying so, where the machine
#                 has no compute-sanitizer
#   9 profile     timed training steps at 224x224 batch 256 bf16 under Nsight Systems (10 steps)
#                 or, where the machine has none, Nsight Compute (2 steps, each kernel's
#                 duration; RDDP_PROFILER=nsys or ncu chooses): ours in NHWC with our fused
#                 BatchNorm, with the legacy and with the graph API's convolutions
#                 (--conv-api graph), and torch.compile's, each collected between
#                 cudaProfilerStart and Stop (the benchmarks' --profile); the GPU kernels' time
#                 by kernel (under nsys also by resnet_ddp's NVTX range: forward, backward,
#                 optimizer), in <report>-profile-<name>.txt (the kernel summary also as
#                 <report>-profile-<name>.csv); then the kernel time per step by category
#                 (convolutions, BatchNorm, pooling, ...) of the three side by side and against
#                 torch.compile's (bench/profile_breakdown.py): the tables in the report, each
#                 category's longest kernels in <report>-profile-breakdown.md. Skipped, saying
#                 so, where the machine has neither profiler
#  10 throughput  bench/run_throughput.sh with its own budget (--budget 470), last
#
# bf16 needs a GPU of compute capability 8.0 or later (nvidia-smi's compute_cap; resnet_ddp refuses
# it below): on an older GPU, such as a V100, every bf16 run is skipped, saying so in the output
# and the report, and fp16 runs where bf16 was the point (the mixed, data and profile parts, the
# engine part's replayed step; kernels_bench and run_throughput.sh do the same themselves). A
# dry run asks nvidia-smi too, where one answers, and otherwise assumes 9.0.
#
# Each step has its own time limit, cut to what is left of its part's budget; a step that the
# budget leaves no time for is NOT RUN and counts as failed. The report is
# gpu-check-<gpu>-<date>.md in this run's folder, bench/results/<date>-<gpu>-<commit>
# (scripts/results_folder.sh names it; the throughput part writes there too): a part run later
# the same day at the same commit appends to it, so that the parts of several commands make one
# report, and the end of each command lists which parts the report holds and which it does not
# yet. Beside it: -precision.png and the --log-json files. Exits non-zero when any step of the
# parts run failed.
#
# Environment: RDDP_BUILD_DIR (build), RDDP_FASHION_MNIST (/usr/share/datasets/fashion-mnist),
# RDDP_REPORT_DIR (the report's folder instead of this run's in bench/results), RDDP_EPOCHS (5,
# the fashion part), RDDP_PRECISION_EPOCHS (3), RDDP_FASHION_FLAGS (more resnet_ddp flags for the
# fashion part's run of ours, e.g. "--batchnorm fused --memory-format nhwc --cuda-graphs on"),
# RDDP_LOG_DIR (keep every step's whole output there; by default a temporary folder that
# is removed), RDDP_COMMIT (the commit to name where the tree has no git history: a copied
# checkout), RDDP_DATA_PRECISION (bf16: the data part trains at the fastest precision, where the
# loader has the least time per batch), RDDP_DATA_FLAGS (the data part's other resnet_ddp flags:
# "--batchnorm fused --memory-format nhwc --cuda-graphs on", our fastest on an H100, unless set;
# set and empty, the defaults), RDDP_DATA_PER_CLASS (640 training JPEGs in each of the
# data part's 8 classes, a tenth as many for validation), RDDP_PART_BUDGET (520 seconds),
# RDDP_PROFILER (nsys or ncu: the profile part's profiler; by default nsys where there is one),
# RDDP_KERNELS_ONLY (the kernels part's tables, kernels_bench --only: e.g. "convolutions" for
# the convolution tables and PyTorch's beside them alone, in a minute or two instead of five).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RDDP_BUILD_DIR:-$root/build}
data=${RDDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
epochs=${RDDP_EPOCHS:-5}
precision_epochs=${RDDP_PRECISION_EPOCHS:-3}
data_precision=${RDDP_DATA_PRECISION:-bf16}
data_flags=(${RDDP_DATA_FLAGS---batchnorm fused --memory-format nhwc --cuda-graphs on})
report_dir=${RDDP_REPORT_DIR:-}
part_budget=${RDDP_PART_BUDGET:-520}
per_class=${RDDP_DATA_PER_CLASS:-640}
bin=$build/resnet_ddp
pack_bin=$build/resnet_ddp_pack

parts=(tests fashion precision engine mixed data kernels sanitize profile throughput)
describe_part() {
  case $1 in
    tests) echo "gpu tests (CUDA vs CPU, bf16, fp16, NHWC) and the NCCL communicator tests" ;;
    fashion) echo "Fashion-MNIST, $epochs cosine epochs, resnet_ddp and PyTorch on the GPU: losses within 5 %, accuracy within half a point" ;;
    precision) echo "Fashion-MNIST, $precision_epochs epochs in fp32, tf32, bf16, fp16: curves PNG and verdict" ;;
    engine) echo "resume and --cuda-graphs on bit-identical to a straight eager run under --deterministic; one process and mpirun -np 1 through NCCL, also with a bfloat16 gradient allreduce; the step replayed with its NCCL allreduces as one CUDA graph; a whole fp32 training run step by step against PyTorch" ;;
    mixed) echo "300 synthetic steps in bf16 and fp16, NCHW and NHWC, cuDNN's and our fused BatchNorm; fp16's skipped steps" ;;
    data) echo "JPEG folder vs resnet_ddp_pack pack: data-wait share per epoch" ;;
    kernels) echo "bench/kernels_bench: our kernels' bandwidth, our BatchNorm beside cuDNN's at ResNet-18's shapes, the 224x224 convolutions through both cuDNN APIs and through PyTorch" ;;
    sanitize) echo "compute-sanitizer memcheck, racecheck and synccheck on the gpu tests of our kernels" ;;
    profile) echo "nsys (10 steps) or ncu (2) at 224x224 ${mixed:-bf16}: ours (NHWC fused BatchNorm; legacy and graph API convolutions) and torch.compile's; kernel time by kernel and per step by category side by side" ;;
    throughput) echo "bench/run_throughput.sh --budget 470 against PyTorch" ;;
  esac
}
budget_of() { [ "$1" = throughput ] && echo 530 || echo "$part_budget"; }

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

dry_run=0 list=0 chosen=() command_budget=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry_run=1 ;;
    --list) list=1 ;;
    --budget)
      [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: --budget needs whole seconds for the whole command, not '${2:-}'" >&2; exit 2; }
      command_budget=$2
      shift ;;
    --part)
      [ $# -ge 2 ] || { echo "gpu_check.sh: --part needs a part name or number; see --list" >&2; exit 2; }
      IFS=, read -ra names <<<"$2"
      for name in "${names[@]}"; do
        if [[ $name =~ ^[0-9]+$ ]] && [ "$name" -ge 1 ] && [ "$name" -le ${#parts[@]} ]; then
          name=${parts[name - 1]}
        fi
        [[ " ${parts[*]} " == *" $name "* ]] ||
          { echo "gpu_check.sh: --part: no part '$name'; the parts are: ${parts[*]} (or 1-${#parts[@]})" >&2; exit 2; }
        chosen+=("$name")
      done
      shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
  shift
done
[[ $part_budget =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: RDDP_PART_BUDGET must be whole seconds, not '$part_budget'" >&2; exit 2; }

if [ $list = 1 ]; then
  for i in "${!parts[@]}"; do
    printf '%d %-10s %4s s  %s\n' $((i + 1)) "${parts[i]}" "$(budget_of "${parts[i]}")" "$(describe_part "${parts[i]}")"
  done
  exit 0
fi
# In the parts' order, whatever order --part named them in, each once.
selected=()
for part in "${parts[@]}"; do
  if [ ${#chosen[@]} -eq 0 ] || [[ " ${chosen[*]} " == *" $part "* ]]; then selected+=("$part"); fi
done

if [ $dry_run = 1 ]; then
  gpu="(dry run: no GPU asked)" driver=none
else
  [ -x "$bin" ] || { echo "gpu_check.sh: no $bin: build first (cmake --build build)" >&2; exit 1; }
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [ -n "$gpu" ] || { echo "gpu_check.sh: nvidia-smi sees no GPU" >&2; exit 1; }
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
fi
commit="${RDDP_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
[ -n "${RDDP_COMMIT:-}" ] || git -C "$root" diff --quiet HEAD 2>/dev/null ||
  commit+=" (with uncommitted changes)"
[ -n "$report_dir" ] ||
  report_dir=$root/bench/results/$("$root/scripts/results_folder.sh" "$gpu" "$commit")
# The precision of the mixed-precision runs: bf16, or fp16 on a GPU without bfloat16 tensor
# cores. A compute capability nvidia-smi does not tell (an old driver) keeps bf16.
compute_cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | xargs)
mixed=bf16 bf16_note=""
if [[ $compute_cap =~ ^[0-9]+\.[0-9]+$ ]]; then
  if [ "${compute_cap%%.*}" -lt 8 ]; then
    mixed=fp16
    bf16_note="bf16 skipped: compute capability $compute_cap has no bfloat16 tensor cores (8.0 and later); fp16 runs in its place"
  fi
elif [ $dry_run = 1 ]; then
  compute_cap="9.0 (assumed: no nvidia-smi answers)"
else
  compute_cap="unknown (nvidia-smi does not say)"
fi
[ "$data_precision" != bf16 ] || data_precision=$mixed
echo "compute capability $compute_cap${bf16_note:+: $bf16_note}"
slug=$(echo "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//')
report_base=$report_dir/gpu-check-$slug-$(date -u +%Y-%m-%d)
report=$report_base.md
if [ -n "${RDDP_LOG_DIR:-}" ]; then
  logs=$RDDP_LOG_DIR
  mkdir -p "$logs"
else
  logs=$(mktemp -d)
  trap 'rm -rf "$logs"' EXIT
fi
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

# Appends standard input to the report; a dry run writes nothing.
to_report() { if [ $dry_run = 1 ]; then cat >/dev/null; else cat >>"$report"; fi; }

if [ $dry_run = 0 ]; then
  mkdir -p "$report_dir"
  if [ ! -s "$report" ]; then
    {
      echo "# GPU check: $gpu"
      echo
      echo "Parts: ${parts[*]} (\`scripts/gpu_check.sh --list\`); each command that runs some of them appends here."
    } >"$report"
  fi
  {
    echo
    echo "---"
    echo
    echo "Command \`scripts/gpu_check.sh ${chosen[*]:+--part $(IFS=,; echo "${chosen[*]}")}\`:"
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, driver $driver," \
         "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'nvcc not found'), host $(hostname), $(nproc) CPUs," \
         "compute capability $compute_cap"
    [ -z "$bf16_note" ] || echo "$bf16_note."
  } >>"$report"
fi

failures=0         # failed steps in this command
command_planned=0  # a dry run's limits, added up over every part
part_failures=0    # failed steps in the current part
part_start=$SECONDS
show() { printf '%q ' "$@"; }

# step LIMIT NAME COMMAND...: runs COMMAND under `timeout`, its limit cut to what the part's
# budget has left, and appends its status, time and output tail to the report. In a dry run it
# prints the command and its limit. Returns the command's status (124: it ran out of time).
step() {
  local limit=$1 name=$2
  shift 2
  local left=$((part_limit - (SECONDS - part_start)))
  # SECONDS counts from the script's start, so the command's budget needs no start time of its own.
  if [ -n "$command_budget" ] && [ $((command_budget - SECONDS)) -lt "$left" ]; then
    left=$((command_budget - SECONDS))
  fi
  [ "$left" -ge 0 ] || left=0
  [ "$limit" -le "$left" ] || limit=$left
  local log=$logs/$(printf '%s' "$name" | tr -cs 'A-Za-z0-9' '_').log
  if [ $dry_run = 1 ]; then
    printf '   [%4s s] %s\n' "$limit" "$name"
    planned=$((planned + limit)) command_planned=$((command_planned + limit))
    printf '            $ %s\n' "$(show "$@")"
    : >"$log"
    return 0
  fi
  echo "== $name"
  if [ "$limit" -lt 10 ]; then
    local spent="the part's budget of $part_limit s"
    [ -z "$command_budget" ] || spent+=" or the command's of $command_budget s"
    echo "   NOT RUN: $spent is spent"
    printf '\n### %s: NOT RUN (%s is spent)\n' "$name" "$spent" >>"$report"
    failures=$((failures + 1)) part_failures=$((part_failures + 1))
    : >"$log"
    return 124
  fi
  local start=$SECONDS status
  timeout --signal=TERM --kill-after=15 "$limit" "$@" >"$log" 2>&1
  status=$?
  local verdict=PASS
  if [ $status -eq 77 ]; then
    verdict=SKIPPED
  elif [ $status -eq 124 ] || [ $status -eq 137 ]; then
    verdict="FAIL (ran past its limit of $limit s)"
  elif [ $status -ne 0 ]; then
    verdict="FAIL (exit $status)"
  fi
  [[ $verdict != FAIL* ]] || { failures=$((failures + 1)) part_failures=$((part_failures + 1)); }
  echo "   $verdict in $((SECONDS - start)) s"
  {
    echo
    echo "### $name: $verdict ($((SECONDS - start)) s)"
    echo
    echo '```'
    echo "\$ $(show "$@")"
    tail -n 60 "$log"
    echo '```'
  } >>"$report"
  return $status
}

# A check computed from the steps' outputs: counts as a failed step when it fails.
verdict_line() {
  local ok=$1 text=$2
  [ $dry_run = 1 ] && return 0
  echo "   $text"
  printf '\n**%s**\n' "$text" >>"$report"
  [ "$ok" = yes ] || { failures=$((failures + 1)) part_failures=$((part_failures + 1)); }
}

# A line for the output and the report that fails nothing: what a part left out, and why.
note() {
  echo "   $1"
  [ $dry_run = 1 ] || printf '\n%s\n' "$1" >>"$report"
}
# The precisions of LIST (words) this GPU computes in, noting bf16's absence where it drops it
# (on stderr: the list is the output).
precisions_here() {
  local precision kept=()
  for precision in "$@"; do
    if [ "$precision" = bf16 ] && [ "$mixed" != bf16 ]; then
      note "$bf16_note" >&2
    else
      kept+=("$precision")
    fi
  done
  echo "${kept[*]}"
}

have_fashion() { [ -f "$data/train-images-idx3-ubyte.gz" ] || [ -f "$data/train-images-idx3-ubyte" ]; }
no_fashion() { verdict_line no "no Fashion-MNIST in $data: set RDDP_FASHION_MNIST"; }
# epoch_field FILE FIELD: the FIELD of every epoch record of a --log-json file, one a line.
epoch_field() { grep '"type":"epoch"' "$1" 2>/dev/null | grep -o "\"$2\":[^,}]*" | cut -d: -f2; }

part_tests() {
  # A case that breaks the CUDA context, crashes or hangs costs only itself: the cases after it
  # run in a new process.
  step 400 "gpu tests" "$root/scripts/run_gpu_tests.sh" "$build/tests/gpu_tests"
  step 60 "NCCL communicator, one process" "$build/tests/mpi/nccl_comm_test"
  if command -v mpirun >/dev/null || [ $dry_run = 1 ]; then
    step 60 "NCCL communicator, mpirun -np 1" mpirun -np 1 "$build/tests/mpi/nccl_comm_test"
  fi
}

part_fashion() {
  have_fashion || [ $dry_run = 1 ] || { no_fashion; return; }
  # Both sides decay the rate to 0 by cosine, the same rate at every step
  # (parity.test_recipe_lr_schedule checks the two schedules against each other). At a
  # constant rate the last epoch's accuracy is a snapshot of weights still taking full-size
  # steps: PyTorch's moved 57, 88, 83, 90, 90 % from one epoch to the next on an H100, so one
  # epoch's figure could not tell a real difference from noise.
  local recipe=(--epochs "$epochs" --batch-size 128 --seed 0 --lr-schedule cosine)
  local ours_json=$logs/fashion-resnet_ddp.jsonl theirs_json=$logs/fashion-pytorch.jsonl
  # --log-json appends; a leftover of an earlier command would be a second run in the file.
  [ $dry_run = 1 ] || rm -f "$ours_json" "$theirs_json"
  # RDDP_FASHION_FLAGS: flags for our side only, such as the fastest ones, whose training must
  # match PyTorch's before they can become the defaults.
  local flags=(${RDDP_FASHION_FLAGS:-})
  step 240 "Fashion-MNIST, $epochs epochs on the GPU${flags[*]:+ (${flags[*]})}" "$bin" --data "$data" \
    --device cuda "${recipe[@]}" "${flags[@]}" --print-every 100 --log-json "$ours_json"
  local ours theirs python
  ours=$(grep -ho 'final validation accuracy [0-9.]*' "$logs"/Fashion_MNIST_*GPU*.log | grep -o '[0-9.]*$')
  python=$("$root/scripts/find_python.sh" torch torchvision numpy 2>/dev/null) || python=""
  [ -n "$python" ] || [ $dry_run = 0 ] || python=python3
  if [ -z "$python" ]; then
    verdict_line no "no Python with torch, torchvision and numpy: the PyTorch side of the comparison did not run"
    return
  fi
  step 270 "the same recipe in PyTorch" "$python" "$root/bench/pytorch_recipe.py" --data "$data" --device cuda \
    "${recipe[@]}" --log-json "$theirs_json"
  [ $dry_run = 1 ] && return
  theirs=$(grep -ho 'final validation accuracy [0-9.]*' "$logs"/the_same_recipe_in_PyTorch.log | grep -o '[0-9.]*$')
  fashion_epochs_table "$ours_json" "$theirs_json"
  fashion_loss_verdict "$ours_json" "$theirs_json"
  # Half a point on the final epoch: after the decay the last steps barely move the weights,
  # and the four precisions of the precision part (same seed, trajectories parted by rounding)
  # ended 3 cosine epochs within 0.26 points of each other on an H100. The two frameworks also
  # differ in initial weights and augmentation draws, as two seeds would; half a point leaves
  # about twice that spread.
  if [ -n "$ours" ] && [ -n "$theirs" ]; then
    local within
    within=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; print (d <= 0.5) ? "yes" : "no" }')
    verdict_line "$within" "Fashion-MNIST after $epochs cosine epochs: resnet_ddp $ours%, PyTorch $theirs%: within half a point: $within"
  else
    local missing=resnet_ddp
    [ -z "$ours" ] || missing=PyTorch
    verdict_line no "Fashion-MNIST: no final accuracy from $missing: nothing to compare"
  fi
}

# fashion_epochs_table OURS THEIRS: both runs' epoch records side by side, into the report.
fashion_epochs_table() {
  local lr=($(epoch_field "$1" lr)) ours_loss=($(epoch_field "$1" train_loss)) theirs_loss=($(epoch_field "$2" train_loss))
  local ours_acc=($(epoch_field "$1" val_accuracy)) theirs_acc=($(epoch_field "$2" val_accuracy)) i
  local ours_top5=($(epoch_field "$1" val_top5_accuracy)) theirs_top5=($(epoch_field "$2" val_top5_accuracy))
  {
    echo
    echo "| epoch | lr at its end | train loss: resnet_ddp | PyTorch | val top-1: resnet_ddp | PyTorch | val top-5: resnet_ddp | PyTorch |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for ((i = 0; i < epochs; i++)); do
      awk -v e=$((i + 1)) -v lr="${lr[i]:--}" -v a="${ours_loss[i]:-}" -v b="${theirs_loss[i]:-}" \
          -v c="${ours_acc[i]:-}" -v d="${theirs_acc[i]:-}" -v f="${ours_top5[i]:-}" -v g="${theirs_top5[i]:-}" '
        function loss(x) { return x == "" ? "-" : sprintf("%.4f", x) }
        function pct(x) { return x == "" ? "-" : sprintf("%.2f %%", 100 * x) }
        BEGIN { printf "| %d | %s | %s | %s | %s | %s | %s | %s |\n", e, lr, loss(a), loss(b), pct(c), pct(d), pct(f), pct(g) }'
    done
  } >>"$report"
}

# fashion_loss_verdict OURS THEIRS: the same rates at each epoch's end, and each epoch's mean
# training loss within 5 % of PyTorch's. The mean over an epoch's 469 steps averages the noise
# of single steps away: at a constant rate on an H100 the two sides differed by 2.8 % in epoch
# 1, where the loss falls fastest, and by 1.3 % or less later; the four precisions of the
# precision part, at one seed, by at most 1.6 %. 5 % leaves room over the worst of these.
fashion_loss_verdict() {
  local ours_lr theirs_lr ours_loss theirs_loss
  ours_lr=$(epoch_field "$1" lr | paste -sd' ') theirs_lr=$(epoch_field "$2" lr | paste -sd' ')
  ours_loss=$(epoch_field "$1" train_loss | paste -sd' ') theirs_loss=$(epoch_field "$2" train_loss | paste -sd' ')
  local same=no
  [ -n "$ours_lr" ] && [ "$ours_lr" = "$theirs_lr" ] && same=yes
  verdict_line "$same" "learning rate at each epoch's end: resnet_ddp ${ours_lr:-none}, PyTorch ${theirs_lr:-none}: the same: $same"
  local verdict
  verdict=$(awk -v a="$ours_loss" -v b="$theirs_loss" -v epochs="$epochs" 'BEGIN {
    n = split(a, ours, " "); m = split(b, theirs, " ")
    if (n != epochs || m != epochs) { printf "no|%d and %d of %d epochs logged", n, m, epochs; exit }
    ok = "yes"; text = ""
    for (i = 1; i <= n; i++) {
      d = 100 * (ours[i] - theirs[i]) / theirs[i]
      if (d > 5 || d < -5) ok = "no"
      text = text sprintf("%s%.4f/%.4f (%+.1f%%)", i > 1 ? ", " : "", ours[i], theirs[i], d)
    }
    print ok "|" text }')
  verdict_line "${verdict%%|*}" "training loss per epoch, resnet_ddp/PyTorch: ${verdict#*|}: every epoch within 5 %: ${verdict%%|*}"
}

part_precision() {
  have_fashion || [ $dry_run = 1 ] || { no_fashion; return; }
  # Same seed, data order and cosine schedule for every precision: only the rounding differs,
  # and the decayed learning rate makes the last epoch's numbers steady enough to compare.
  local runs=() precision file png=$report_base-precision.png
  for precision in $(precisions_here fp32 tf32 bf16 fp16); do
    file=$report_base-precision-$precision.jsonl
    # --log-json appends; a leftover of an earlier command would be a second run in the file.
    [ $dry_run = 1 ] || rm -f "$file"
    step 115 "precision $precision: Fashion-MNIST, $precision_epochs epochs" "$bin" --data "$data" --device cuda \
      --precision "$precision" --epochs "$precision_epochs" --lr-schedule cosine --batch-size 128 --seed 0 \
      --print-every 25 --log-json "$file"
    # A run that stopped early still has its finished epochs to show.
    if [ $dry_run = 1 ] || grep -q '"type":"epoch"' "$file" 2>/dev/null; then runs+=("$precision=$file"); fi
  done
  local python
  python=$("$root/scripts/find_python.sh" matplotlib 2>/dev/null) || python=""
  [ -n "$python" ] || [ $dry_run = 0 ] || python=python3
  if [ -z "$python" ]; then
    verdict_line no "no Python with matplotlib: the precision curves were not drawn (the --log-json files are $report_base-precision-*.jsonl)"
    return
  fi
  if [ ${#runs[@]} -lt 2 ]; then
    verdict_line no "precision: fewer than two runs finished an epoch: nothing to compare"
    return
  fi
  step 60 "precision curves and verdict" "$python" "$root/scripts/plot_precision_curves.py" "${runs[@]}" \
    --reference "${runs[0]%%=*}" -o "$png" --title "Fashion-MNIST, $precision_epochs epochs, on $gpu"
  [ $dry_run = 1 ] && return
  {
    echo
    echo "Precision curves: \`${png#"$root"/}\`"
    echo
    # A blank line ends the Markdown table before the verdict's lines.
    grep -E '^(\||rule:|FAIL:|verdict:)' "$logs/precision_curves_and_verdict.log" | sed '/^rule:/{x;p;x}'
  } >>"$report"
}

part_engine() {
  local resume=(--dataset synthetic --device cuda --deterministic --batch-size 64 --limit-train 1024 --limit-val 256
                --epochs 2 --print-every 8)
  [ $dry_run = 1 ] || rm -rf "$logs/ck"
  step 60 "resume, straight run" "$bin" "${resume[@]}" --max-steps 24 --save-weights "$logs/straight.rddp"
  step 60 "resume, first half" "$bin" "${resume[@]}" --max-steps 12 --checkpoint-dir "$logs/ck"
  step 60 "resume, second half" "$bin" "${resume[@]}" --max-steps 24 --checkpoint-dir "$logs/ck" --resume \
    --save-weights "$logs/resumed.rddp"
  step 10 "resumed weights bit-identical to the straight run" cmp "$logs/straight.rddp" "$logs/resumed.rddp"
  # The same run with the step replayed as a CUDA graph, through the trainer (its epoch end,
  # evaluation and smaller batches stay eager): it must give the eager run's bits.
  step 60 "straight run with --cuda-graphs on" "$bin" "${resume[@]}" --max-steps 24 --cuda-graphs on \
    --save-weights "$logs/graphed.rddp"
  step 10 "graphed weights bit-identical to the eager run" cmp "$logs/straight.rddp" "$logs/graphed.rddp"

  local nccl_run=(--dataset synthetic --device cuda --batch-size 128 --limit-train 1024 --limit-val 256 --epochs 2
                  --print-every 4)
  step 60 "one process through NCCL" "$bin" "${nccl_run[@]}"
  if command -v mpirun >/dev/null || [ $dry_run = 1 ]; then
    step 60 "mpirun -np 1 through NCCL" mpirun -np 1 "$bin" "${nccl_run[@]}"
    # One rank still sends every bucket through ncclAllReduce, so this runs the bfloat16
    # allreduce's packing, NCCL call and widening on the device; the averages only round.
    step 60 "mpirun -np 1 through NCCL, bfloat16 gradient allreduce" mpirun -np 1 "$bin" "${nccl_run[@]}" \
      --grad-allreduce bf16
  fi
  # The trainer captures no reducer with one rank, so the benchmark's --ddp runs the step with
  # its NCCL allreduces (float32, then bfloat16 with its casts) captured into the CUDA graph:
  # a capture NCCL refuses stops it with the cause.
  local captured=("$build/bench/cuda_step_bench" --size 32 --batch 128 --classes 10 --precision "$mixed" --warmup 10
                  --windows 2 --steps-per-window 10 --conv-algorithms heuristic --ddp --cuda-graphs on)
  step 60 "step and NCCL allreduces replayed as one CUDA graph" "${captured[@]}"
  step 60 "step and bfloat16 NCCL allreduces replayed as one CUDA graph" "${captured[@]}" --grad-allreduce bf16
  # parity.test_training_run with the program on the GPU: a whole run (warm-up, cosine, a short
  # last batch, evaluation each epoch) in strict fp32, every step's loss and the weights at the
  # end against PyTorch's run on the CPU. One rank: NCCL will not put two ranks on one GPU.
  step 80 "whole training run against PyTorch, fp32" env RDDP_BUILD_DIR="$build" RDDP_SOURCE_DIR="$root" \
    RDDP_FASHION_MNIST="$data" RDDP_TRAINING_RUN_DEVICE=cuda RDDP_TRAINING_RUN_GPUS=1 RDDP_REQUIRE_PARITY=1 \
    "$root/tests/parity/run_python_test.sh" "$root/tests/parity/test_training_run.py"
}

part_mixed() {
  # Synthetic data has 1024 training images: 8 steps of 128 an epoch, so 300 steps take 38
  # epochs, each with its epoch line and record.
  # Each with cuDNN's BatchNorm and with ours (--batchnorm fused); on an H100 the runs with
  # cuDNN's took 12 to 36 s.
  local precision format batchnorm file rows=""
  for precision in $(precisions_here bf16 fp16); do
    for format in nchw nhwc; do
      for batchnorm in cudnn fused; do
        file=$logs/mixed-$precision-$format-$batchnorm.jsonl
        step 60 "$precision $format $batchnorm: 300 synthetic steps" "$bin" --dataset synthetic --device cuda \
          --precision "$precision" --memory-format "$format" --batchnorm "$batchnorm" --batch-size 128 \
          --epochs 40 --max-steps 300 --print-every 50 --log-json "$file"
        [ $dry_run = 1 ] && continue
        local log=$logs/${precision}_${format}_${batchnorm}_300_synthetic_steps.log
        local loss speed skipped="" ok=yes
        loss=$(epoch_field "$file" train_loss | tail -1)
        speed=$(epoch_field "$file" images_per_s | tail -1)
        if [ $precision = fp16 ]; then
          # Every epoch line must say how many steps the loss scaling skipped.
          local lines counted
          lines=$(grep -c 'epoch [0-9]*/40: ' "$log")
          # (Not the warning that follows an epoch with skipped steps: it says "step(s) skipped" too.)
          counted=$(grep -c 'epoch [0-9]*/40: .*step(s) skipped' "$log")
          skipped=$(epoch_field "$file" skipped_steps | awk '{ s += $1 } END { print s + 0 }')
          [ "$lines" -gt 0 ] && [ "$lines" = "$counted" ] || ok=no
          verdict_line "$ok" "fp16 $format $batchnorm: $counted of $lines epoch lines report skipped steps; $skipped step(s) skipped in all"
        fi
        rows+="| $precision | $format | $batchnorm | ${loss:-none} | ${speed:-none} | ${skipped:--} |"$'\n'
      done
    done
  done
  [ $dry_run = 1 ] && return
  {
    echo
    echo "| precision | memory format | batchnorm | last epoch's train loss | last epoch's images/s | skipped steps (fp16) |"
    echo "| --- | --- | --- | ---: | ---: | ---: |"
    printf '%s' "$rows"
  } >>"$report"
}

part_data() {
  local folder=$logs/jpegs packed=$logs/packed python
  # ImageNet-like JPEGs (500x375, photograph-like content) make the loader decode as much per
  # image as ImageNet does; the classes are random, so the accuracies mean nothing here. 8
  # classes of 640 training images: 40 steps of 128 an epoch. Without numpy and Pillow,
  # Fashion-MNIST as PNGs (standard library only), which decode far faster.
  if python=$("$root/scripts/find_python.sh" numpy PIL 2>/dev/null) || [ $dry_run = 1 ]; then
    python=${python:-python3}
      local val_count=$((per_class / 10 > 0 ? per_class / 10 : 1))
    step 150 "an image folder of 8x$per_class + 8x$val_count synthetic JPEGs" bash -c '
      python=$1 maker=$2 out=$3 count=$4 val_count=$5 pids=()
      for class in 0 1 2 3 4 5 6 7; do
        "$python" "$maker" --out "$out/train/class-$class" --count "$count" --seed "$class" & pids+=($!)
        "$python" "$maker" --out "$out/val/class-$class" --count "$val_count" --seed $((100 + class)) & pids+=($!)
      done
      failed=0
      for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
      exit $failed' make-folder "$python" "$root/bench/make_jpegs.py" "$folder" "$per_class" "$val_count"
  elif have_fashion; then
    step 150 "an image folder of Fashion-MNIST PNGs (no numpy and Pillow for JPEGs)" python3 \
      "$root/data/fashion_mnist_to_folder.py" --source "$data" --out "$folder" --train-per-class 600 --val-per-class 60
  else
    verdict_line no "data: neither numpy and Pillow (for JPEGs) nor Fashion-MNIST (for PNGs): no image folder"
    return
  fi
  step 60 "resnet_ddp_pack of the folder" "$pack_bin" "$folder" "$packed"
  local from source file
  for from in folder pack; do
    source=$folder
    [ $from = pack ] && source=$packed
    file=$logs/data-$from.jsonl
    step 130 "3 epochs from the $from, $data_precision" "$bin" --data "$source" --device cuda \
      --precision "$data_precision" "${data_flags[@]}" --epochs 3 --batch-size 128 \
      --print-every 10 --log-json "$file"
  done
  [ $dry_run = 1 ] && return
  # The share of each epoch's training time spent waiting for a batch, as each epoch prints it.
  local epoch rows="" folder_wait pack_wait folder_speed pack_speed
  folder_wait=($(epoch_field "$logs/data-folder.jsonl" data_wait_share))
  pack_wait=($(epoch_field "$logs/data-pack.jsonl" data_wait_share))
  folder_speed=($(epoch_field "$logs/data-folder.jsonl" images_per_s))
  pack_speed=($(epoch_field "$logs/data-pack.jsonl" images_per_s))
  for epoch in 0 1 2; do
    rows+="| $((epoch + 1)) | $(awk -v s="${folder_wait[epoch]:-nan}" 'BEGIN { printf "%.1f", 100 * s }') "
    rows+="| $(printf '%.0f' "${folder_speed[epoch]:-0}") "
    rows+="| $(awk -v s="${pack_wait[epoch]:-nan}" 'BEGIN { printf "%.1f", 100 * s }') "
    rows+="| $(printf '%.0f' "${pack_speed[epoch]:-0}") |"$'\n'
  done
  {
    echo
    echo "Data wait ($data_precision${data_flags[*]:+, ${data_flags[*]}}, batch 128, $(nproc) CPUs; epoch 1 includes timing the convolution algorithms):"
    echo
    echo "| epoch | folder: data wait % | folder: images/s | pack: data wait % | pack: images/s |"
    echo "| ---: | ---: | ---: | ---: | ---: |"
    printf '%s' "$rows"
    echo
    echo "As each epoch line printed it:"
    echo
    echo '```'
    for from in folder pack; do
      grep 'data wait' "$logs/3_epochs_from_the_${from}_$data_precision.log" | sed "s/^/$from: /"
    done
    echo '```'
  } >>"$report"
  printf '%s' "$rows"
}

part_kernels() {
  # The whole table goes beside the report: the output tail the report keeps would cut it.
  local only=()
  [ -z "${RDDP_KERNELS_ONLY:-}" ] || only=(--only "$RDDP_KERNELS_ONLY")
  step 300 "kernel benchmarks" "$build/bench/kernels_bench" "${only[@]}"
  [ $dry_run = 1 ] || cp "$logs/kernel_benchmarks.log" "${report%.md}-kernels.txt"
  # The same convolutions as PyTorch runs them, beside ours: whether its cuDNN choices beat ours.
  # A kernels_bench that ended before its convolutions has failed already, and left none to time.
  if [ $dry_run = 0 ] && ! grep -q '^{"record":"conv"' "$logs/kernel_benchmarks.log"; then
    echo "   (no convolution records from kernels_bench: PyTorch's are not timed)"
    return
  fi
  local python
  python=$("$root/scripts/find_python.sh" torch 2>/dev/null) || python=""
  [ -n "$python" ] || [ $dry_run = 0 ] || python=python3
  [ -n "$python" ] || { verdict_line no "no Python with torch: PyTorch's convolutions were not timed beside ours"; return; }
  step 150 "PyTorch's convolutions beside ours" "$python" "$root/bench/pytorch_convs.py" \
    "$logs/kernel_benchmarks.log" --json "${report%.md}-convs.jsonl"
  [ $dry_run = 1 ] || cp "$logs/PyTorch_s_convolutions_beside_ours.log" "${report%.md}-convs.md"
}

# find_tool NAME [PATH...]: the program NAME on PATH, in the CUDA toolkit, at one of the PATHs
# given, or anywhere under /usr, /opt, /root or /home (a Python environment's nvidia wheels carry
# compute-sanitizer, for one).
find_tool() {
  local name=$1 candidate
  shift
  for candidate in "$(command -v "$name" 2>/dev/null)" "${CUDA_HOME:-/usr/local/cuda}/bin/$name" \
    "/usr/local/cuda/bin/$name" "$@"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] && { echo "$candidate"; return 0; }
  done
  candidate=$(find /usr /opt /root /home -name "$name" -type f -perm -u+x 2>/dev/null | head -1)
  [ -n "$candidate" ] && echo "$candidate"
}

part_sanitize() {
  local sanitizer
  sanitizer=$(find_tool compute-sanitizer)
  if [ -z "$sanitizer" ]; then
    [ $dry_run = 1 ] || {
      echo "   SKIPPED: no compute-sanitizer on this machine (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin, Python's nvidia wheels)"
      printf '\n**SKIPPED: no compute-sanitizer on this machine**\n' >>"$report"
      return
    }
    sanitizer=compute-sanitizer
  fi
  # Only our kernels (namespace rddp::cuda, so "rddp" in both the mangled and the plain name) are
  # checked; cuDNN's and cuBLAS's, which the tests call as references, run unchecked and at
  # full speed. An older compute-sanitizer without --kernel-regex checks every kernel.
  local only_ours=()
  if [ $dry_run = 1 ] || "$sanitizer" --help 2>&1 | grep -q -- '--kernel-regex'; then
    only_ours=(--kernel-regex kns=rddp)
  fi
  local tests=("$build/tests/gpu_tests" '--source-file=*/test_kernels.cu,*/test_cuda_batchnorm_kernels.cpp')
  local tool
  for tool in memcheck racecheck synccheck; do
    step 160 "compute-sanitizer $tool, our kernels" \
      "$sanitizer" --tool "$tool" --error-exitcode 1 "${only_ours[@]}" "${tests[@]}"
  done
}

# The profiler: Nsight Systems where the machine has it, else Nsight Compute (RDDP_PROFILER=nsys
# or ncu chooses). An nsys inside an Nsight Compute installation is that tool's helper, which
# cannot make a report of its own, so it does not count as Nsight Systems.
profiler_tools() {
  nsys=$(find_tool nsys /opt/nvidia/nsight-systems/*/bin/nsys)
  [[ $nsys != */nsight-compute/* ]] || nsys=""
  ncu=$(find_tool ncu /opt/nvidia/nsight-compute/*/ncu)
  profiler=${RDDP_PROFILER:-}
  if [ -z "$profiler" ]; then
    if [ -n "$nsys" ]; then profiler=nsys; elif [ -n "$ncu" ]; then profiler=ncu; fi
  fi
}

part_profile() {
  local nsys ncu profiler
  profiler_tools
  case ${profiler:-none} in
    nsys | ncu) ;;
    none) [ $dry_run = 1 ] && profiler=nsys ;;
    *)
      verdict_line no "RDDP_PROFILER is nsys or ncu, not '$profiler'"
      return ;;
  esac
  local tool=""
  [ -z "$profiler" ] || tool=${!profiler:-}
  if [ -z "$profiler" ] || { [ -z "$tool" ] && [ $dry_run = 0 ]; }; then
    local missing="no nsys or ncu on this machine"
    [ -z "$profiler" ] || missing="no $profiler on this machine"
    echo "   SKIPPED: $missing (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin, /opt/nvidia)"
    printf '\n**SKIPPED: %s**\n' "$missing" >>"$report"
    return
  fi
  [ -n "$tool" ] || tool=$profiler
  local python
  python=$("$root/scripts/find_python.sh" torch torchvision 2>/dev/null) || python=""
  [ -n "$python" ] || [ $dry_run = 0 ] || python=python3
  # The configuration where torch.compile led most at the last measurement; 10 warm-up steps
  # (timed convolution search and compilation happen there, unprofiled), then the collected
  # ones: 10 under nsys, 2 under ncu, which runs the kernels one at a time (about 0.1 s each on
  # an H100, 2026-11-22), with the clocks and caches left as they are.
  local steps=10 own_limit=120 compile_limit=180 summary_limit=30 collect
  if [ "$profiler" = nsys ]; then
    collect=("$tool" profile --capture-range=cudaProfilerApi --capture-range-end=stop --trace=cuda,nvtx
             --sample=none --cpuctxsw=none --force-overwrite=true -o)
  else
    steps=2 own_limit=130 summary_limit=20
    # Only the program itself: torch.compile's compile workers launch no kernels.
    collect=("$tool" --profile-from-start off --target-processes application-only
             --clock-control none --cache-control none --metrics gpu__time_duration.sum
             --force-overwrite -o)
  fi
  local shape=(--size 224 --batch 256 --precision "$mixed" --warmup 10 --windows 1
               --steps-per-window "$steps" --profile)
  local name csv summaries=()
  # Our fastest variant with the legacy API's convolutions and with the graph API's, and
  # torch.compile's step, whose convolutions go through the graph API too.
  for name in resnet_ddp-nhwc-fusedbn resnet_ddp-nhwc-fusedbn-cudnngraph pytorch-compile; do
    # Beside the report, so that the breakdown can be redone; one left by an earlier command
    # today must not stand in for a program that fails now.
    csv=${report%.md}-profile-$name.csv
    [ $dry_run = 1 ] || rm -f "$csv"
    local program=("$build/bench/cuda_step_bench" "${shape[@]}" --memory-format nhwc
                   --batchnorm fused) limit=$own_limit
    case $name in
      *-cudnngraph) program+=(--conv-api graph) ;;
      pytorch-compile)
        [ -n "$python" ] || { verdict_line no "no Python with torch and torchvision for the torch.compile profile"; continue; }
        program=("$python" "$root/bench/pytorch_ddp.py" --mode compile "${shape[@]}") limit=$compile_limit ;;
    esac
    step "$limit" "$profiler profile, $name" "${collect[@]}" "$logs/profile-$name" "${program[@]}" || continue
    # nsys: the kernel summary under its name since nsys 2023, else its older one, as text for
    # the report and as CSV for the breakdown by category, and the GPU time of each NVTX range
    # where this nsys has that report. ncu: its summary per kernel as text, and every launch's
    # duration as CSV (the raw page, else the details page, which the breakdown reads too). A
    # CSV the profiler failed to write is removed, not half read.
    local summary_name
    if [ "$profiler" = nsys ]; then
      summary_name="nsys stats, $name"
      step "$summary_limit" "$summary_name" bash -c '
        "$1" stats --report cuda_gpu_kern_sum "$2" || "$1" stats --report gpukernsum "$2" || exit 1
        "$1" stats --report cuda_gpu_kern_sum --format csv "$2" >"$3" ||
          "$1" stats --report gpukernsum --format csv "$2" >"$3" ||
          { rm -f "$3"; echo "(no kernel summary in CSV from this nsys: no breakdown by category)"; }
        "$1" stats --report nvtx_gpu_proj_sum "$2" || echo "(no nvtx_gpu_proj_sum report in this nsys)"' \
        _ "$tool" "$logs/profile-$name.nsys-rep" "$csv"
    else
      summary_name="ncu summary, $name"
      step "$summary_limit" "$summary_name" bash -c '
        "$1" --import "$2" --print-summary per-kernel || exit 1
        "$1" --import "$2" --csv --page raw --print-units base --print-kernel-base demangled >"$3" ||
          "$1" --import "$2" --csv --print-units base --print-kernel-base demangled >"$3" ||
          { rm -f "$3"; echo "(no CSV from this ncu: no breakdown by category)"; }' \
        _ "$tool" "$logs/profile-$name.ncu-rep" "$csv"
    fi
    local stats_status=$?
    [ $dry_run = 1 ] || cp "$logs/$(printf '%s' "$summary_name" | tr -cs 'A-Za-z0-9' '_').log" \
      "${report%.md}-profile-$name.txt"
    if [ $stats_status -eq 0 ] && { [ $dry_run = 1 ] || [ -s "$csv" ]; }; then
      summaries+=("$name=$csv")
    fi
  done
  profile_breakdown "$steps" "${summaries[@]}"
}

# profile_breakdown STEPS NAME=CSV...: the kernel time per step by category of each program
# profiled, side by side (bench/profile_breakdown.py), in <report>-profile-breakdown.md with
# each category's longest kernels; the category tables go into the report as well. The
# differences are against torch.compile's where it was profiled: where ours spends more.
profile_breakdown() {
  local steps=$1
  shift
  if [ $# -eq 0 ]; then
    verdict_line no "no program's kernel summary in CSV: no breakdown of kernel time by category"
    return
  fi
  local against=() tables=$logs/profile-breakdown-tables.md
  [[ " $* " != *" pytorch-compile="* ]] || against=(--baseline pytorch-compile)
  # Only the standard library: any python3 does, whether or not it has torch.
  step 10 "kernel time per step by category" python3 "$root/bench/profile_breakdown.py" \
    --steps "$steps" "${against[@]}" --output "${report%.md}-profile-breakdown.md" \
    --table-output "$tables" "$@" || return
  [ $dry_run = 1 ] && return
  {
    echo
    cat "$tables"
    echo
    echo "Each category's longest kernels: \`$(basename "${report%.md}")-profile-breakdown.md\`."
  } >>"$report"
}

part_throughput() {
  [ -x "$root/bench/run_throughput.sh" ] || { verdict_line no "no bench/run_throughput.sh"; return; }
  # Its GPU tests take minutes of its budget; the tests part has run them on this build when
  # the report records it as passed.
  # The build is this script's precondition, so the benchmark takes it as it is.
  local flags=(--budget 470 --build-dir "$build" --prebuilt --results-dir "$report_dir")
  if [ $dry_run = 0 ] && grep -q '^\*\*part tests: PASS' "$report"; then flags+=(--skip-tests); fi
  step 525 "throughput against PyTorch" "$root/bench/run_throughput.sh" "${flags[@]}"
}

ran=()
for part in "${selected[@]}"; do
  part_limit=$(budget_of "$part") part_start=$SECONDS part_failures=0 planned=0
  number=0
  for i in "${!parts[@]}"; do [ "${parts[i]}" = "$part" ] && number=$((i + 1)); done
  echo "=== part $number $part (budget $part_limit s): $(describe_part "$part")"
  printf '\n## Part %s %s: %s\n' "$number" "$part" "$(describe_part "$part")" | to_report
  "part_$part"
  status=PASS
  [ $part_failures -eq 0 ] || status="FAIL ($part_failures failed)"
  if [ $dry_run = 1 ]; then
    status="dry run: its steps' limits add up to $planned s of its $part_limit s budget"
    [ $planned -le $part_limit ] || status+=" (the budget cuts the last ones short)"
    echo "   $status"
  fi
  ran+=("$part: $status in $((SECONDS - part_start)) s")
  printf '\n**part %s: %s** (%s s)\n' "$part" "$status" "$((SECONDS - part_start))" | to_report
done

echo
echo "parts run by this command:"
printf '  %s\n' "${ran[@]}"
not_run=()
for part in "${parts[@]}"; do [[ " ${selected[*]} " == *" $part "* ]] || not_run+=("$part"); done
echo "parts not run by this command: ${not_run[*]:-none}"
if [ $dry_run = 1 ]; then
  if [ -n "$command_budget" ]; then
    echo "dry run: the steps' limits add up to $command_planned s of the command's $command_budget s budget$([ $command_planned -le "$command_budget" ] || echo ', which cuts the last ones short')"
  fi
  echo "dry run: nothing ran; the report would be $report"
  exit 0
fi
# The report gathers the parts of every command today: say which are in it and which are not.
{
  echo
  echo "Parts in this report so far:"
  for part in "${parts[@]}"; do
    line=$(grep "^\*\*part $part: " "$report" | tail -1)
    if [ -n "$line" ]; then echo "- $part: $(echo "$line" | sed 's/^\*\*part [a-z]*: //; s/\*\*//')"
    else echo "- $part: not run yet"; fi
  done
  echo
  echo "$failures step(s) failed in this command"
} | tee -a "$report"
echo "report: $report"
[ $failures -eq 0 ]
