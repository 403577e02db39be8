# shellcheck shell=bash
# Sourced by benchmark_throughput.sbatch and benchmark_multi_node.sbatch: the settings, checks
# and runs they share. benchmark_setup reads the environment (the variables in
# benchmark_throughput.sbatch's header) and writes the job's settings; benchmark_run runs
# resnet_ddp, then PyTorch, on some GPUs; benchmark_summary prints the table of every run
# (bench/scaling_table.py) and returns non-zero when a run failed or was not made. SIGUSR1 (the
# jobs' --signal=B:USR1, before the time limit) stops the run in progress and the runs after
# it, so that the job still ends with the table of the runs made.

say() { echo "$(date +%T) $*"; }
refuse() {
  echo "$*"
  exit 1
}
# A JSON string: backslashes, quotes and control characters escaped.
json_string() {
  local text=${1//\\/\\\\}
  text=${text//\"/\\\"}
  text=${text//$'\t'/\\t}
  text=${text//$'\n'/\\n}
  text=${text//$'\r'/\\r}
  printf '"%s"' "$text"
}

positive_integer() {
  [[ $2 =~ ^[1-9][0-9]*$ ]] || refuse "$1 must be a whole number above 0, not '$2'"
}

# The first GPU of this node as nvidia-smi sees it: gpu_name, driver, compute_capability
# ("unknown" where nvidia-smi or the field is missing: drivers before 510 lack compute_cap).
read_gpu() {
  gpu_name="none seen by nvidia-smi on $(hostname -s)" driver=unknown compute_capability=unknown
  command -v nvidia-smi >/dev/null || { gpu_name="no nvidia-smi on $(hostname -s)"; return; }
  local line query=--format=csv,noheader
  if line=$(nvidia-smi --query-gpu=name,driver_version,compute_cap "$query" 2>/dev/null); then
    line=${line%%$'\n'*}
    gpu_name=${line%%, *}
    line=${line#*, }
    driver=${line%%, *}
    compute_capability=${line#*, }
  elif line=$(nvidia-smi --query-gpu=name,driver_version "$query" 2>/dev/null); then
    line=${line%%$'\n'*}
    gpu_name=${line%%, *}
    driver=${line#*, }
  fi
}

# leave_out PRECISION REASON: one entry of benchmark.json's "skipped".
leave_out() { skipped+=("{\"precision\":\"$1\",\"reason\":$(json_string "$2")}"); }

# The precisions to measure: PRECISIONS (auto: bf16, or fp16 where the GPU has no bf16), each
# checked against the GPU's compute capability. Sets precisions and skipped (JSON objects).
choose_precisions() {
  local major=${compute_capability%%.*} requested=${PRECISIONS:-auto} precision
  local no_bf16="the $gpu_name has compute capability $compute_capability; bf16 needs 8.0 or later"
  [[ $major =~ ^[0-9]+$ ]] || major=''
  precisions=() skipped=()
  if [ "$requested" = auto ]; then
    requested=bf16
    if [ -n "$major" ] && [ "$major" -lt 8 ]; then
      requested=fp16
      leave_out bf16 "$no_bf16: fp16 measured instead"
    fi
  fi
  for precision in $requested; do
    case $precision in
      tf32 | fp32 | fp16) precisions+=("$precision") ;;
      bf16)
        if [ -n "$major" ] && [ "$major" -lt 8 ]; then
          leave_out bf16 "$no_bf16"
        else
          precisions+=(bf16)
        fi
        ;;
      *) refuse "PRECISIONS: '$precision' is not one of auto, bf16, fp16, tf32, fp32" ;;
    esac
  done
  [ ${#precisions[@]} -gt 0 ] ||
    refuse "PRECISIONS='$PRECISIONS': none of them runs on the $gpu_name; try PRECISIONS=fp16"
}

# Data, batch and image size. resnet_ddp's synthetic set holds 1024 training images of 32x32
# (its settings table says so): every GPU must get a whole batch each step, or the runs measure
# smaller batches than PyTorch's.
choose_data() {
  local most_gpus=$1 synthetic_images=1024
  if [ -n "${DATA:-}" ]; then
    [ -e "$DATA" ] || refuse "DATA=$DATA: no such file or directory on $(hostname -s);" \
      "unset DATA for synthetic images"
    data_flags=(--data "$DATA")
    data_text=$DATA
    BATCH=${BATCH:-256}
    IMAGE_SIZE=${IMAGE_SIZE:-224}
  else
    data_flags=(--dataset synthetic)
    data_text="synthetic ($synthetic_images images of 32x32, 10 classes)"
    if [ -z "${BATCH:-}" ]; then
      BATCH=128
      while [ $((BATCH * most_gpus)) -gt $synthetic_images ] && [ "$BATCH" -gt 1 ]; do
        BATCH=$((BATCH / 2))
      done
    fi
    IMAGE_SIZE=${IMAGE_SIZE:-32}
    [ $((BATCH * most_gpus)) -le $synthetic_images ] ||
      refuse "BATCH=$BATCH on $most_gpus GPUs is more than the $synthetic_images synthetic" \
        "images: every step would be a smaller batch. Set BATCH=$((synthetic_images / most_gpus))" \
        "or less, or DATA=/path/to/imagenet"
  fi
  positive_integer BATCH "$BATCH"
  positive_integer IMAGE_SIZE "$IMAGE_SIZE"
}

# The commit measured, and whether the tree differs from it.
source_commit() {
  local commit
  if ! commit=$(git rev-parse --short=12 HEAD 2>/dev/null); then
    echo "unknown (not a git checkout)"
    return
  fi
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] ||
    commit="$commit with uncommitted changes"
  echo "$commit"
}

# benchmark_setup MOST_GPUS: reads the settings, checks them for a run on at most MOST_GPUS GPUs,
# and writes the results directory's benchmark.json and versions.txt.
benchmark_setup() {
  [ -x build/resnet_ddp ] ||
    refuse "no build/resnet_ddp here ($PWD): submit from the built source tree"
  command -v python3 >/dev/null ||
    refuse "no python3 on $(hostname -s): bench/scaling_table.py needs one (any Python 3)"
  FLAGS=${FLAGS---batchnorm fused --memory-format nhwc --cuda-graphs on --conv-api graph}
  # PyTorch's layout follows ours: channels_last is PyTorch's name for NHWC.
  if [ -z "${PYTORCH_FLAGS+set}" ]; then
    PYTORCH_FLAGS=''
    [[ " $FLAGS " =~ " --memory-format nhwc " ]] && PYTORCH_FLAGS=--channels-last
  fi
  STEPS=${STEPS:-300}
  WINDOW=${WINDOW:-20}
  WARMUP_STEPS=${WARMUP_STEPS:-20}
  positive_integer STEPS "$STEPS"
  positive_integer WINDOW "$WINDOW"
  positive_integer WARMUP_STEPS "$WARMUP_STEPS"
  [ "$STEPS" -ge $((WARMUP_STEPS + WINDOW)) ] ||
    refuse "STEPS=$STEPS leaves no window of WINDOW=$WINDOW steps after the" \
      "WARMUP_STEPS=$WARMUP_STEPS left out: raise STEPS"
  choose_data "$1"
  read_gpu
  choose_precisions
  pytorch_reason=''
  PYTORCH_DDP=${PYTORCH_DDP:-bench/pytorch_ddp.py}
  if [ "${PYTORCH:-on}" = off ]; then
    pytorch_reason="not run: PYTORCH=off"
  elif [ -z "${PYTHON:-}" ] &&
    ! PYTHON=$(scripts/find_python.sh torch torchvision 2>/dev/null); then
    pytorch_reason="not run: no Python on $(hostname -s) imports torch and torchvision"
    pytorch_reason+=" (set PYTHON=/path/to/python)"
  fi

  results=${RESULTS_DIR:-benchmark-$SLURM_JOB_NAME-$SLURM_JOB_ID}
  mkdir -p "$results" || exit 1
  : >"$results/runs.jsonl"
  ./build/resnet_ddp --version >"$results/versions.txt" 2>&1
  local skipped_list
  skipped_list=$(IFS=,; echo "${skipped[*]}")
  cat >"$results/benchmark.json" <<EOF
{"job_id": $(json_string "$SLURM_JOB_ID"), "job_name": $(json_string "$SLURM_JOB_NAME"),
 "host": $(json_string "$(hostname -s)"), "date": $(json_string "$(date -u +%Y-%m-%dT%H:%M:%SZ)"),
 "commit": $(json_string "$(source_commit)"), "gpu_name": $(json_string "$gpu_name"),
 "driver": $(json_string "$driver"), "compute_capability": $(json_string "$compute_capability"),
 "data": $(json_string "$data_text"), "batch_per_gpu": $BATCH, "image_size": $IMAGE_SIZE,
 "steps": $STEPS, "warmup_steps": $WARMUP_STEPS, "steps_per_window": $WINDOW,
 "flags": $(json_string "$FLAGS"), "pytorch_flags": $(json_string "$PYTORCH_FLAGS"),
 "versions_file": "versions.txt", "skipped": [$skipped_list]}
EOF
  say "GPU $gpu_name (compute capability $compute_capability, driver $driver);" \
    "precisions ${precisions[*]}"
  say "resnet_ddp $FLAGS; batch $BATCH per GPU, $IMAGE_SIZE px, $STEPS steps, data $data_text"
  say "PyTorch: ${pytorch_reason:-$PYTHON $PYTORCH_DDP${PYTORCH_FLAGS:+ $PYTORCH_FLAGS}};" \
    "results in $results/"
  # PyTorch's ranks meet at the job's first node, on a port of the job's own.
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
  export MASTER_ADDR MASTER_PORT
  failed_runs=0
}

time_up=0 step=''
# The job's output, for the trap: it runs while a run's output is redirected to that run's log.
exec 3>&1
stop_runs() {
  time_up=1
  say "SIGUSR1: the time limit is near: no more runs" >&3
  [ -z "$step" ] || kill "$step"
}
trap stop_runs USR1

# run_step COMMAND...: runs it in the background (bash runs a trap while it waits, not during a
# foreground command), and returns its status.
run_step() {
  local status
  "$@" &
  step=$!
  wait "$step"
  status=$?
  # Interrupted by the signal: wait again for the command's own status.
  while kill -0 "$step" 2>/dev/null; do
    wait "$step"
    status=$?
  done
  step=''
  return $status
}

# add_run JSON_FIELDS: one line of runs.jsonl.
add_run() { echo "{$1}" >>"$results/runs.jsonl"; }

# record_run IMPL STATUS LOG [RECORDS]: the run's line of runs.jsonl (with benchmark_run's
# $fields); a failed run is counted, and one that the time limit stopped is noted as such.
record_run() {
  local line="\"impl\":\"$1\",$fields"
  if [ "$2" != 0 ] && [ $time_up = 1 ]; then
    line+=",\"status\":$(json_string "stopped by the job's time limit (sbatch --time): see $3")"
  else
    line+=",\"exit_status\":$2,\"log\":\"$3\"${4:+,\"records\":\"$4\"}"
    if [ "$2" != 0 ]; then
      say "$1 failed (exit status $2): $results/$3"
      failed_runs=$((failed_runs + 1))
    fi
  fi
  add_run "$line"
}

# benchmark_run PRECISION NODES GPUS_PER_NODE: resnet_ddp, then PyTorch, on NODES nodes with
# GPUS_PER_NODE tasks each; every task sees all of its node's GPUs and takes the one of its
# local rank, and has the node's CPUs per GPU, whatever the run's GPU count.
benchmark_run() {
  local precision=$1 nodes=$2 per_node=$3 status classes
  local ranks=$((nodes * per_node))
  local name=$precision-${nodes}n-${ranks}gpu
  local ours=$name-resnet_ddp.log theirs=$name-pytorch.log records=$name-resnet_ddp.jsonl
  local place=(--nodes="$nodes" --ntasks-per-node="$per_node" --ntasks="$ranks"
               --gpus-per-node="$gpus" --cpus-per-task="$cpus_per_task")
  local fields="\"precision\":\"$precision\",\"nodes\":$nodes,\"gpus\":$ranks"
  local late="\"status\":\"not run: the job's time limit came first (sbatch --time)\""
  if [ $time_up = 1 ]; then
    add_run "\"impl\":\"resnet_ddp\",$fields,$late"
    add_run "\"impl\":\"pytorch\",$fields,$late"
    return
  fi
  say "=== $precision, $ranks GPU(s) on $nodes node(s): resnet_ddp"
  # shellcheck disable=SC2086  # FLAGS is a list of options
  run_step srun --mpi=pmix --kill-on-bad-exit=1 "${place[@]}" ./build/resnet_ddp \
    "${data_flags[@]}" --batch-size "$BATCH" --image-size "$IMAGE_SIZE" --precision "$precision" \
    --max-steps "$STEPS" --epochs "$STEPS" --print-every "$WINDOW" \
    --log-json "$results/$records" $FLAGS >"$results/$ours" 2>&1
  status=$?
  tail -n 2 "$results/$ours"
  record_run resnet_ddp $status "$ours" "$records"
  if [ $time_up = 1 ]; then
    add_run "\"impl\":\"pytorch\",$fields,$late"
    return
  fi
  if [ -n "$pytorch_reason" ]; then
    add_run "\"impl\":\"pytorch\",$fields,\"status\":$(json_string "$pytorch_reason")"
    return
  fi
  # The class count of the model resnet_ddp trained (its settings table).
  classes=$(sed -n 's/.* num_classes=\([0-9]*\) .*/\1/p' "$results/$ours" | head -n 1)
  if [ -z "$classes" ]; then
    add_run "\"impl\":\"pytorch\",$fields,\"status\":$(json_string \
      "not run: resnet_ddp's output ($ours) names no class count to match")"
    return
  fi
  say "=== $precision, $ranks GPU(s) on $nodes node(s): PyTorch"
  # The same steps: WARMUP_STEPS not timed, then windows of WINDOW steps.
  # shellcheck disable=SC2086  # PYTORCH_FLAGS is a list of options
  run_step srun --kill-on-bad-exit=1 "${place[@]}" "$PYTHON" "$PYTORCH_DDP" --srun \
    --batch "$BATCH" --size "$IMAGE_SIZE" --classes "$classes" --precision "$precision" \
    --warmup "$WARMUP_STEPS" --steps-per-window "$WINDOW" \
    --windows $(((STEPS - WARMUP_STEPS) / WINDOW)) $PYTORCH_FLAGS >"$results/$theirs" 2>&1
  status=$?
  grep -E '^(images/s total|SKIPPED)' "$results/$theirs" | head -n 1
  record_run pytorch $status "$theirs"
}

# The table of every run, also written to the results directory as scaling.md and scaling.json.
benchmark_summary() {
  echo
  python3 bench/scaling_table.py "$results" || return 1
  echo "(also in $results/scaling.md and scaling.json; each run's output and records beside them)"
  if [ $time_up = 1 ]; then
    say "the time limit came before the last runs: raise sbatch --time"
    return 1
  fi
  [ "$failed_runs" = 0 ] && return
  say "$failed_runs run(s) failed: see the notes under the table"
  return 1
}
