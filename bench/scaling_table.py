#!/usr/bin/env python3
"""The scaling table of a benchmark job (scripts/slurm/benchmark_throughput.sbatch and
benchmark_multi_node.sbatch): for each precision and GPU count, resnet_ddp's images/s in total
and per GPU, its scaling efficiency against one GPU, its data-wait share and MFU, beside PyTorch
DDP's images/s at the same GPU count and the ratio of the two.

    scaling_table.py DIR      reads DIR/benchmark.json and DIR/runs.jsonl and the files they
                              name; writes DIR/scaling.md and DIR/scaling.json; prints the
                              markdown

DIR/benchmark.json (written by the job): the job's settings and environment: "gpu_name",
"driver", "compute_capability", "host", "date", "commit", "job_id", "job_name", "data",
"batch_per_gpu", "image_size", "steps", "warmup_steps", "steps_per_window", "flags",
"pytorch_flags", "versions_file" (the output of `resnet_ddp --version`) and "skipped" (a list of
{"precision", "reason"}). DIR/runs.jsonl: one line per run: "impl" (resnet_ddp or pytorch),
"precision", "nodes", "gpus", "log", "exit_status", for resnet_ddp "records" (its --log-json
file) and, for a run that did not start, "status" (why).

resnet_ddp's figures come from its --log-json records. A step record closes a window of steps
(--print-every) and carries the window's images/s over all ranks and its MFU; a window counts
only when its first step comes after the first "warmup_steps" steps (see median_window). An
epoch record carries the epoch's data-wait share: of rank 0 and of the rank that waited most.
PyTorch's figure is the record bench/pytorch_ddp.py prints (its median window, after its own
warm-up steps).

Needs only Python 3's standard library.
"""
import argparse
import json
import os
import statistics
import sys

OURS = "resnet_ddp"
PYTORCH = "pytorch"
COLUMNS = ["precision", "nodes", "GPUs", "images/s", "per GPU", "efficiency", "data wait", "MFU",
           "PyTorch images/s", "PyTorch per GPU", "PyTorch efficiency", "ours/PyTorch"]


class BadInput(Exception):
    """A file of the job that cannot be read as the table needs it: the message names it."""


def read_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except OSError as error:
        raise BadInput(f"{path}: {error.strerror}: is this a benchmark job's directory?")
    except json.JSONDecodeError as error:
        raise BadInput(f"{path}: not JSON ({error})")


def read_json_lines(path, only_objects=False):
    """The JSON objects of a file, one a line. With only_objects, lines that are not JSON
    objects (a program's other output) are skipped; otherwise each one is an error naming its
    line."""
    records = []
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    if only_objects:
                        continue
                    raise BadInput(f"{path}:{number}: not a JSON object ({error})")
                if isinstance(record, dict):
                    records.append(record)
                elif not only_objects:
                    raise BadInput(f"{path}:{number}: not a JSON object")
    except OSError as error:
        raise BadInput(f"{path}: {error.strerror}")
    return records


def parse_versions(text):
    """`resnet_ddp --version`: "resnet_ddp 0.1.0", then a line per library, its name in 13
    columns after two spaces ("  CUDA runtime  13.0")."""
    versions = {}
    for line in text.splitlines():
        if line.startswith("resnet_ddp "):
            versions[OURS] = line.split(None, 1)[1].strip()
        elif line.startswith("  ") and line.strip():
            name, value = line[2:15].strip(), line[15:].strip()
            if name and value:
                versions[name] = value
    return versions


def median_window(records, warmup_steps, path):
    """(median images/s, median MFU or None, windows kept) of a run's step records.

    cuDNN times its algorithms on the first step (and the graph API builds its plans then), and
    with --cuda-graphs on the step is captured after a few eager ones: those steps are far slower
    than the rest, so a window counts only when its first step comes after `warmup_steps`. The
    median of the windows kept, as pytorch_ddp.py reports, is robust to a window slowed by
    something else on the node. A window starts after the step that closed the last one."""
    rates, mfus = [], []
    last_step = 0
    for record in records:
        if record.get("type") != "step":
            continue
        try:
            step = int(record["global_step"])
            rate = float(record["images_per_s"])
        except (KeyError, TypeError, ValueError):
            raise BadInput(f"{path}: a step record without global_step and images_per_s: "
                           f"{json.dumps(record)}")
        if last_step + 1 > warmup_steps:
            rates.append(rate)
            if "mfu" in record:
                mfus.append(float(record["mfu"]))
        last_step = step
    if not rates:
        return None, None, 0
    # MFU is missing where the device's peak is unknown (the CPU, an unlisted GPU).
    mfu = statistics.median(mfus) if len(mfus) == len(rates) else None
    return statistics.median(rates), mfu, len(rates)


def data_wait(records):
    """(rank 0's share, the most-waiting rank's share) of the run's training time spent waiting
    for data, over its epoch records weighted by their seconds; (None, None) without any."""
    seconds = share = share_max = 0.0
    for record in records:
        if record.get("type") != "epoch" or "data_wait_share" not in record:
            continue
        weight = float(record.get("seconds", 0.0))
        seconds += weight
        share += weight * float(record["data_wait_share"])
        share_max += weight * float(record.get("data_wait_share_max", record["data_wait_share"]))
    if seconds <= 0:
        return None, None
    return share / seconds, share_max / seconds


def ours_result(run, directory, warmup_steps):
    result = {"status": "ok", "log": run.get("log")}
    if "status" in run:
        result["status"] = run["status"]
        return result
    if run.get("exit_status", 0) != 0:
        result["status"] = f"failed (exit status {run['exit_status']}): see {run.get('log')}"
        return result
    path = os.path.join(directory, run["records"])
    records = read_json_lines(path)
    rate, mfu, kept = median_window(records, warmup_steps, path)
    if rate is None:
        result["status"] = (f"no step window after the first {warmup_steps} steps in {path}: "
                            "run more steps (STEPS) or shorter windows (WINDOW)")
        return result
    share, share_max = data_wait(records)
    result.update({"images_per_s_total": rate, "images_per_s_per_gpu": rate / run["gpus"],
                   "mfu": mfu, "data_wait_share": share, "data_wait_share_max": share_max,
                   "windows_kept": kept})
    return result


def pytorch_result(run, directory):
    """PyTorch's figure from the run's output: the record pytorch_ddp.py prints, or the line
    that says why there is none."""
    result = {"status": "ok", "log": run.get("log")}
    if "status" in run:
        result["status"] = run["status"]
        return result
    path = os.path.join(directory, run["log"])
    records = [r for r in read_json_lines(path, only_objects=True)
               if r.get("record") == "throughput"]
    if records and records[-1].get("status") == "ok" and run.get("exit_status", 0) == 0:
        record = records[-1]
        if int(record.get("world_size", run["gpus"])) != run["gpus"]:
            result["status"] = (f"{path}: PyTorch ran {record.get('world_size')} ranks, not "
                                f"{run['gpus']}: was it started under srun with --srun?")
            return result
        total = float(record["images_per_s_total"])
        result.update({"images_per_s_total": total, "images_per_s_per_gpu": total / run["gpus"],
                       "versions": record.get("versions", {}), "gpu": record.get("gpu")})
        return result
    with open(path, encoding="utf-8", errors="replace") as lines:
        skipped = [line.strip() for line in lines if line.startswith("SKIPPED")]
    if skipped and run.get("exit_status", 0) == 0:
        result["status"] = skipped[0]
    elif records and records[-1].get("status") not in (None, "ok"):
        result["status"] = str(records[-1]["status"])
    else:
        result["status"] = f"failed (exit status {run.get('exit_status')}): see {run.get('log')}"
    return result


def check_run(run, path, number):
    needed = ["impl", "precision", "nodes", "gpus"]
    if run.get("impl") == OURS and "status" not in run:
        needed.append("records")
    if "status" not in run:
        needed.append("log")
    missing = [key for key in needed if key not in run]
    if missing:
        raise BadInput(f"{path}:{number}: a run without {', '.join(missing)}")
    if run["impl"] not in (OURS, PYTORCH):
        raise BadInput(f"{path}:{number}: unknown impl {run['impl']!r} (resnet_ddp or pytorch)")


def build_rows(directory, settings, runs):
    warmup_steps = int(settings.get("warmup_steps", 0))
    rows, by_key = [], {}
    for run in runs:
        key = (run["precision"], int(run["nodes"]), int(run["gpus"]))
        if key not in by_key:
            by_key[key] = {"precision": key[0], "nodes": key[1], "gpus": key[2],
                           OURS: None, PYTORCH: None}
            rows.append(by_key[key])
        result = (ours_result(run, directory, warmup_steps) if run["impl"] == OURS
                  else pytorch_result(run, directory))
        by_key[key][run["impl"]] = result
    # Efficiency: images/s per GPU against the one-GPU run of the same precision and program.
    for impl in (OURS, PYTORCH):
        for row in rows:
            result = row[impl]
            if result is None or result["status"] != "ok":
                continue
            base = by_key.get((row["precision"], 1, 1), {}).get(impl)
            result["efficiency"] = (result["images_per_s_per_gpu"] / base["images_per_s_per_gpu"]
                                    if base and base["status"] == "ok" else None)
    for row in rows:
        ours, theirs = row[OURS], row[PYTORCH]
        row["ratio"] = (ours["images_per_s_total"] / theirs["images_per_s_total"]
                        if ours and theirs and ours["status"] == "ok" and theirs["status"] == "ok"
                        else None)
    return rows


def rate_text(value):
    return "-" if value is None else f"{value:.0f}"


def percent_text(value):
    return "-" if value is None else f"{100.0 * value:.1f}%"


def render(directory, settings, versions, rows):
    notes = []

    def cell(result, text):
        """The figure, or a note number where the run gave none."""
        if result is None:
            return "not run"
        if result["status"] == "ok":
            return text
        if result["status"] not in notes:
            notes.append(result["status"])
        return f"[{notes.index(result['status']) + 1}]"

    table = []
    for row in rows:
        ours, theirs = row[OURS], row[PYTORCH]
        table.append([
            row["precision"], str(row["nodes"]), str(row["gpus"]),
            cell(ours, rate_text(ours and ours.get("images_per_s_total"))),
            cell(ours, rate_text(ours and ours.get("images_per_s_per_gpu"))),
            cell(ours, percent_text(ours and ours.get("efficiency"))),
            cell(ours, percent_text(ours and ours.get("data_wait_share_max"))),
            cell(ours, percent_text(ours and ours.get("mfu"))),
            cell(theirs, rate_text(theirs and theirs.get("images_per_s_total"))),
            cell(theirs, rate_text(theirs and theirs.get("images_per_s_per_gpu"))),
            cell(theirs, percent_text(theirs and theirs.get("efficiency"))),
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
        ])
    widths = [max(len(line[i]) for line in table + [COLUMNS]) for i in range(len(COLUMNS))]

    def line(cells):
        return "| " + " | ".join(text.ljust(width) for text, width in zip(cells, widths)) + " |"

    pytorch_versions = next((row[PYTORCH]["versions"] for row in rows
                             if row[PYTORCH] and row[PYTORCH]["status"] == "ok"), None)
    library_list = ", ".join(f"{name} {value}" for name, value in versions.items()
                             if name != OURS)
    out = ["# Training throughput: resnet_ddp and PyTorch DDP by GPU count", ""]
    out.append(f"- GPU: {settings.get('gpu_name')}, compute capability "
               f"{settings.get('compute_capability')}, driver {settings.get('driver')}")
    out.append(f"- resnet_ddp {versions.get(OURS, 'unknown')}: {library_list or 'no versions'}")
    if pytorch_versions:
        out.append("- PyTorch: " + ", ".join(f"{name} {value}"
                                             for name, value in pytorch_versions.items()))
    out.append(f"- job {settings.get('job_id')} ({settings.get('job_name')}) on "
               f"{settings.get('host')}, {settings.get('date')}, commit {settings.get('commit')}")
    out.append(f"- data: {settings.get('data')}; {settings.get('batch_per_gpu')} images of "
               f"{settings.get('image_size')} px per GPU and step; {settings.get('steps')} steps, "
               f"the first {settings.get('warmup_steps')} left out (warm-up), windows of "
               f"{settings.get('steps_per_window')} steps, the median window counts")
    out.append(f"- resnet_ddp flags: {settings.get('flags') or '(none)'}")
    out.append(f"- PyTorch: torchvision resnet18 in DistributedDataParallel, flags: "
               f"{settings.get('pytorch_flags') or '(none)'}; its batch stays on the GPU "
               "(no data loading)")
    for skipped in settings.get("skipped", []):
        out.append(f"- not measured: {skipped['precision']}: {skipped['reason']}")
    out += ["", line(COLUMNS), "|" + "|".join("-" * (width + 2) for width in widths) + "|"]
    out += [line(cells) for cells in table]
    out.append("")
    out.append("Efficiency: images/s per GPU against one GPU's. Data wait: the share of training "
               "time the rank that waited most spent waiting for its next batch. MFU: model "
               "FLOPs per second against the GPU's dense peak at this precision.")
    if notes:
        out.append("")
        out += [f"[{number}] {text}" for number, text in enumerate(notes, 1)]
    return "\n".join(out) + "\n"


def summarise(directory):
    settings_path = os.path.join(directory, "benchmark.json")
    runs_path = os.path.join(directory, "runs.jsonl")
    settings = read_json(settings_path)
    if not isinstance(settings, dict):
        raise BadInput(f"{settings_path}: not a JSON object")
    runs = read_json_lines(runs_path)
    if not runs:
        raise BadInput(f"{runs_path}: no runs: the job ended before its first run (see its "
                       "output)")
    for number, run in enumerate(runs, 1):
        check_run(run, runs_path, number)
    versions = {}
    if settings.get("versions_file"):
        path = os.path.join(directory, settings["versions_file"])
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                versions = parse_versions(file.read())
        except OSError as error:
            raise BadInput(f"{path}: {error.strerror}")
    rows = build_rows(directory, settings, runs)
    markdown = render(directory, settings, versions, rows)
    summary = {
        "gpu": {"name": settings.get("gpu_name"), "driver": settings.get("driver"),
                "compute_capability": settings.get("compute_capability")},
        "versions": versions,
        "pytorch_versions": next((row[PYTORCH]["versions"] for row in rows
                                  if row[PYTORCH] and row[PYTORCH]["status"] == "ok"), None),
        "date": settings.get("date"), "commit": settings.get("commit"),
        "job_id": settings.get("job_id"), "job_name": settings.get("job_name"),
        "host": settings.get("host"),
        "settings": {key: settings.get(key) for key in (
            "data", "batch_per_gpu", "image_size", "steps", "warmup_steps", "steps_per_window",
            "flags", "pytorch_flags")},
        "skipped": settings.get("skipped", []),
        "columns": COLUMNS,
        "rows": rows,
    }
    with open(os.path.join(directory, "scaling.md"), "w", encoding="utf-8") as file:
        file.write(markdown)
    with open(os.path.join(directory, "scaling.json"), "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=1)
        file.write("\n")
    return markdown


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="the benchmark job's results directory")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(summarise(args.directory))
    except BadInput as error:
        print(f"scaling_table.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
