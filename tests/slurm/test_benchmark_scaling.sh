#!/usr/bin/env bash
# The benchmark jobs (scripts/slurm/benchmark_throughput.sbatch and benchmark_multi_node.sbatch)
# run for real by sbatch on two of the local node's GPU slots, with resnet_ddp itself training on
# the CPU (tiny synthetic images, few steps), and on the PyTorch side a stand-in that writes
# pytorch_ddp.py's record (stand_in_pytorch_ddp.py) or the real pytorch_ddp.py, which finds no
# GPU. Each job must end with one table whose figures are those of the runs' own records: the
# median window after the warm-up, efficiency against one GPU, the ratio to PyTorch; and write it
# as markdown and JSON with the GPU, versions, date and commit; also when the time limit stops it.
# shellcheck source=tests/slurm/slurm_test_lib.sh
source "$(dirname "$0")/slurm_test_lib.sh"
slurm_test_begin benchmark_scaling
command -v python3 >/dev/null || skip "no python3 for bench/scaling_table.py"
[ "$(nproc)" -ge 2 ] || skip "the benchmark test needs 2 CPUs, this machine has $(nproc)"

# The job runs from a source tree: a git checkout of the scripts and bench/, and the program.
tree=$work_dir/tree
mkdir -p "$tree/build" "$tree/scripts" "$tree/bench" "$tree/bin"
cp -r "$source_dir/scripts/slurm" "$source_dir/scripts/find_python.sh" "$source_dir/scripts/wait_step.sh" "$tree/scripts/"
cp "$source_dir/bench/scaling_table.py" "$source_dir/bench/pytorch_ddp.py" \
  "$source_dir/tests/slurm/stand_in_pytorch_ddp.py" "$tree/bench/"
cp "${RDDP_RESNET_DDP:?}" "$tree/build/resnet_ddp"
(cd "$tree" && git init -q && git add scripts bench &&
  git -c user.name=test -c user.email=test@localhost commit -q -m tree) || fail "git commit failed"
commit=$(git -C "$tree" rev-parse --short=12 HEAD)
# nvidia-smi as it answers on a node of V100s, which have no bf16.
printf '#!/bin/sh\necho "Tesla V100-SXM2-32GB, 535.104.05, 7.0"\necho "Tesla V100-SXM2-32GB, 535.104.05, 7.0"\n' \
  >"$tree/bin/nvidia-smi"
chmod +x "$tree/bin/nvidia-smi"
# Ten steps of eight 16x16 images on the CPU engine: steps 1-4 are the warm-up left out, then
# three windows of two steps.
export FLAGS="--device cpu" IMAGE_SIZE=16 BATCH=8 STEPS=10 WINDOW=2 WARMUP_STEPS=4 OMP_NUM_THREADS=1
unset DATA PYTHON PYTORCH PYTORCH_FLAGS

# check_figures RESULTS_DIR: every row of scaling.json against the runs' own records, and the
# markdown row against the JSON.
check_figures() {
  python3 - "$1" <<'EOF' || fail "the table's figures are not those of the runs' records (above)"
import json, os, statistics, sys
directory = sys.argv[1]
summary = json.load(open(os.path.join(directory, "scaling.json")))
runs = [json.loads(line) for line in open(os.path.join(directory, "runs.jsonl"))]
settings = json.load(open(os.path.join(directory, "benchmark.json")))
markdown = open(os.path.join(directory, "scaling.md")).read().splitlines()
one_gpu = {}
for row in summary["rows"]:
    run = next(r for r in runs if r["impl"] == "resnet_ddp" and (r["precision"], r["nodes"], r["gpus"])
               == (row["precision"], row["nodes"], row["gpus"]))
    records = [json.loads(line) for line in open(os.path.join(directory, run["records"]))]
    steps = [r for r in records if r["type"] == "step"]
    kept = [r["images_per_s"] for previous, r in zip([{"global_step": 0}] + steps, steps)
            if previous["global_step"] + 1 > settings["warmup_steps"]]
    ours = row["resnet_ddp"]
    assert ours["status"] == "ok", ours
    assert len(kept) == 3 == ours["windows_kept"], (kept, ours)
    assert abs(ours["images_per_s_total"] - statistics.median(kept)) < 1e-9, (kept, ours)
    assert abs(ours["images_per_s_per_gpu"] * row["gpus"] - ours["images_per_s_total"]) < 1e-9
    epoch = [r for r in records if r["type"] == "epoch"][-1]
    assert abs(ours["data_wait_share_max"] - epoch["data_wait_share_max"]) < 1e-12, (epoch, ours)
    assert ours["mfu"] is None, "the CPU engine reports no MFU"
    if row["gpus"] == 1:
        one_gpu[row["precision"]] = ours["images_per_s_per_gpu"]
    efficiency = ours["images_per_s_per_gpu"] / one_gpu[row["precision"]]
    assert abs(ours["efficiency"] - efficiency) < 1e-12, (efficiency, ours)
    theirs = row["pytorch"]
    cells = [f"{ours['images_per_s_total']:.0f}", f"{ours['images_per_s_per_gpu']:.0f}",
             f"{100 * efficiency:.1f}%", f"{100 * ours['data_wait_share_max']:.1f}%", "-"]
    if theirs["status"] == "ok":
        assert abs(row["ratio"] - ours["images_per_s_total"] / theirs["images_per_s_total"]) < 1e-12
        cells += [f"{theirs['images_per_s_total']:.0f}", f"{theirs['images_per_s_per_gpu']:.0f}",
                  f"{100 * theirs['efficiency']:.1f}%", f"{row['ratio']:.2f}"]
    wanted = [row["precision"], str(row["nodes"]), str(row["gpus"])] + cells
    lines = [line for line in markdown if line.startswith("|") and
             [cell.strip() for cell in line.strip("|").split("|")][:len(wanted)] == wanted]
    assert len(lines) == 1, (wanted, markdown)
    print(f"row {row['precision']} {row['nodes']} node(s) {row['gpus']} GPU(s): {' | '.join(cells)}")
EOF
}
# ends_with_table OUTPUT DIR: the job's output ends with its one table, and the line saying
# where the files are (then at most the line saying why the job failed).
ends_with_table() {
  expect_file_lines 1 '^\| precision +\| nodes +\| GPUs +\| images/s +\| per GPU +\| efficiency +\| data wait +\| MFU +\| PyTorch images/s +\| PyTorch per GPU +\| PyTorch efficiency +\| ours/PyTorch +\|$' "$1"
  tail -n 2 "$1" | grep -q "^(also in $2/scaling.md and scaling.json" ||
    fail "the job's output does not end with the table and where it is written"
  if sed -n '/^| precision /,$p' "$1" | grep -qE '^[0-9:]{8} ==='; then
    fail "a run's output comes after the table"
  fi
}

# One node, 1 and 2 GPUs, on "V100s": bf16 is asked for but left out, fp32 runs (the CPU
# engine has no fp16); PyTorch is the stand-in.
PATH=$tree/bin:$PATH PRECISIONS="bf16 fp32" PYTHON=python3 PYTORCH_DDP=bench/stand_in_pytorch_ddp.py \
  PYTORCH_FLAGS=--channels-last submit_job "$tree" --gpus-per-node=2 scripts/slurm/benchmark_throughput.sbatch
wait_for_job_end "$job" 300
show_job_output
expect_job_state COMPLETED
results=benchmark-resnet_ddp_bench-$job
ends_with_table "$job_out" "$results"
expect_file_lines 2 '^\| fp32 ' "$tree/$results/scaling.md"
expect_file_lines 0 '^\| bf16 ' "$tree/$results/scaling.md"
expect_file_lines 1 '^- not measured: bf16: the Tesla V100-SXM2-32GB has compute capability 7.0; bf16 needs 8.0 or later$' \
  "$tree/$results/scaling.md"
check_figures "$tree/$results"
python3 - "$tree/$results/scaling.json" "$commit" <<'EOF' || fail "scaling.json lacks what it must name (above)"
import json, re, sys
s = json.load(open(sys.argv[1]))
assert s["gpu"] == {"name": "Tesla V100-SXM2-32GB", "driver": "535.104.05",
                    "compute_capability": "7.0"}, s["gpu"]
for library in ("resnet_ddp", "CUDA runtime", "cuDNN", "cuBLAS", "NCCL", "MPI"):
    assert s["versions"].get(library), (library, s["versions"])
assert s["pytorch_versions"] == {"torch": "stand-in", "torchvision": "stand-in"}
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s["date"]) and s["commit"] == sys.argv[2], s
assert s["settings"]["flags"] == "--device cpu" and s["settings"]["pytorch_flags"] == "--channels-last"
assert [(r["precision"], r["nodes"], r["gpus"]) for r in s["rows"]] == [("fp32", 1, 1), ("fp32", 1, 2)]
assert [r["pytorch"]["images_per_s_total"] for r in s["rows"]] == [40, 72]
assert s["rows"][1]["pytorch"]["efficiency"] == 0.9
assert [entry["precision"] for entry in s["skipped"]] == ["bf16"]
EOF
for ranks in 1 2; do
  expect_file_lines 1 "^stand-in pytorch_ddp.py: $ranks ranks, arguments --srun --batch 8 --size 16 --classes 10 --precision fp32 --warmup 4 --steps-per-window 2 --windows 3 --channels-last\$" \
    "$tree/$results/fp32-1n-${ranks}gpu-pytorch.log"
  expect_file_lines 1 "^  world size +$ranks ranks?$" "$tree/$results/fp32-1n-${ranks}gpu-resnet_ddp.log"
  expect_file_lines 1 "^  batch size +8 per rank, $((8 * ranks)) effective$" "$tree/$results/fp32-1n-${ranks}gpu-resnet_ddp.log"
done

# Several nodes (one here): one GPU, then the whole node; the real pytorch_ddp.py under srun,
# which says it has no GPU; no nvidia-smi, so the GPU is unknown.
PRECISIONS=fp32 submit_job "$tree" --gpus-per-node=2 --nodes=1 scripts/slurm/benchmark_multi_node.sbatch
wait_for_job_end "$job" 300
show_job_output
expect_job_state COMPLETED
results=benchmark-resnet_ddp_bench_nodes-$job
ends_with_table "$job_out" "$results"
expect_file_lines 2 '^\| fp32 +\| 1 +\| [12] +\| [0-9]+ +\| [0-9]+ +\| [0-9.]+% +\| [0-9.]+% +\| - +\| \[1\] +\| \[1\] +\| \[1\] +\| - +\|$' \
  "$tree/$results/scaling.md"
expect_file_lines 1 '^\[1\] (SKIPPED: pytorch_ddp.py: torch.cuda.is_available\(\) is False|not run: no Python on .* imports torch and torchvision)' \
  "$tree/$results/scaling.md"
expect_file_lines 1 '^- GPU: no nvidia-smi on ' "$tree/$results/scaling.md"
check_figures "$tree/$results"

# The time limit near (--signal=B:USR1, as scancel --signal=USR1 --batch sends it) during the
# first run of a longer job: that run stops, the later ones are not made, and the job still
# ends with the table, and fails.
STEPS=400 PRECISIONS="tf32 fp32" PYTORCH=off submit_job "$tree" --gpus-per-node=2 \
  scripts/slurm/benchmark_throughput.sbatch
results=benchmark-resnet_ddp_bench-$job
first=$tree/$results/tf32-1n-1gpu-resnet_ddp.log
wait_for_files 120 "$first"
for _ in $(seq 300); do grep -q "step 2/" "$first" && break; sleep 0.2; done
grep -q "step 2/" "$first" || fail "the first run did not start training"
scancel --signal=USR1 --batch "$job"
wait_for_job_end "$job" 120
show_job_output
expect_job_state FAILED
ends_with_table "$job_out" "$results"
expect_file_lines 1 "SIGUSR1: the time limit is near: no more runs" "$job_out"
expect_file_lines 1 "the time limit came before the last runs: raise sbatch --time" "$job_out"
expect_file_lines 1 '^\| tf32 +\| 1 +\| 1 +\| \[1\] .*\| \[2\] +\| - +\|$' "$tree/$results/scaling.md"
expect_file_lines 3 '^\| (tf32 +\| 1 +\| 2|fp32 +\| 1 +\| [12]) +\| \[2\] .*\| \[2\] +\| - +\|$' \
  "$tree/$results/scaling.md"
expect_file_lines 1 "^\[1\] stopped by the job's time limit \(sbatch --time\): see tf32-1n-1gpu-resnet_ddp.log$" \
  "$tree/$results/scaling.md"
expect_file_lines 1 "^\[2\] not run: the job's time limit came first \(sbatch --time\)$" "$tree/$results/scaling.md"
pass
