#!/usr/bin/env python3
"""Markdown tables of throughput records: resnet_ddp (bench/cuda_step_bench) beside PyTorch
(bench/pytorch_ddp.py), one row per configuration, from the JSON lines they print. The first
table holds the verdicts: whether the fastest resnet_ddp variant reaches 1.3x PyTorch eager, is
ahead of torch.compile, and peaks no higher in device memory than PyTorch, and by how much.

    compare_throughput.py FILE...           tables on stdout (other lines in FILE are skipped, so
                                            results .md files, which end with their raw records,
                                            serve too: several runs on one GPU merge, a
                                            measurement winning over a run that gave none)
    compare_throughput.py --check FILE...   only check that every implementation counted the
                                            same model (parameters, FLOPs per image)

Records (bench/results/README.md has the schema): "throughput" (a measurement, or with a
"status" other than "ok", a run that gave none: not implemented, timed out, failed), "device"
(cuda_step_bench --device-info: the GPU's known dense peaks, from which MFU is computed for
records that carry none) and "describe" (the model counts alone, no GPU). Runs of one
configuration that counted different FLOPs or parameters measured different models; the
tables say so above everything else and the exit status is 1.
"""
import argparse
import json
import sys

OURS = "resnet_ddp"
GIB = float(1 << 30)


def read_records(paths):
    records = []
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and "record" in record:
                    records.append(record)
    return records


def config_key(r):
    return (r.get("world_size", 1), bool(r.get("ddp", False)), r["stem"], r["image_size"],
            r["batch_per_gpu"], r["classes"], r["optimizer"], r["precision"])


def model_key(r):
    return (r["stem"], r["image_size"], r["classes"])


def column(r):
    """The implementation's column: its name, and the memory format when not the default."""
    name = r["impl"]
    if r.get("memory_format", "nchw") != "nchw":
        name += f" ({r['memory_format']})"
    return name


def model_mismatches(records):
    """Lines naming each model (stem, size, classes) whose counts differ between records."""
    counts = {}
    for r in records:
        if r["record"] in ("throughput", "describe") and "flops_per_image" in r:
            counts.setdefault(model_key(r), {})[column(r)] = (r["params"], r["flops_per_image"])
    problems = []
    for key, by_impl in sorted(counts.items()):
        first_params, first_flops = next(iter(by_impl.values()))
        # FLOPs are printed to 9 significant digits by one side and exactly by the other.
        if any(params != first_params or abs(flops - first_flops) > 1e-6 * first_flops
               for params, flops in by_impl.values()):
            listed = "; ".join(f"{impl}: {p} parameters, {f:.6g} FLOPs/image"
                               for impl, (p, f) in sorted(by_impl.items()))
            problems.append(f"{key[0]} stem, {key[1]} px, {key[2]} classes: {listed}")
    return problems


def device_peaks(records):
    """{gpu name: device record} from cuda_step_bench --device-info."""
    return {r["gpu"]: r for r in records if r["record"] == "device"}


def mfu_of(r, devices):
    if r.get("mfu") is not None:
        return r["mfu"]
    device = devices.get(r.get("gpu"))
    peaks = device.get("peak_tflops") if device else None
    peak = peaks.get(r["precision"]) if peaks else None
    if not peak or r.get("tflops_per_gpu") is None:
        return None
    return r["tflops_per_gpu"] / peak


def ok(r):
    return r is not None and r.get("status") == "ok"


def cells(by_column, columns, text_of):
    """One cell per column: text_of(record) for a measurement, else why there is none."""
    def one(r):
        if ok(r):
            return text_of(r)
        if r is None:
            return "not run"
        status = r.get("status", "no status")
        # The whole message is in the raw records and the log.
        return status if len(status) <= 60 else status[:57] + "..."
    return [one(by_column.get(c)) for c in columns]


EAGER_GOAL = 1.3


def fastest(by_column, candidates):
    """The column among `candidates` with the most images/s in this row, or None."""
    measured = [c for c in candidates if ok(by_column.get(c))]
    return (max(measured, key=lambda c: by_column[c]["images_per_s_per_gpu"])
            if measured else None)


def goal_cells(by_column, ours, eager, compiled):
    """The fastest of our columns, and whether it meets each goal: "met ..." or "short ..."
    with the figures, or why there is no verdict."""
    best = fastest(by_column, ours)
    if best is None:
        return ["no measurement", "-", "-", "-"]
    rate = by_column[best]["images_per_s_per_gpu"]

    def speed(theirs, goal, goal_text, mode):
        other = fastest(by_column, theirs)
        if other is None:
            return f"no figure for {mode}"
        value = rate / by_column[other]["images_per_s_per_gpu"]
        verdict = "met" if value >= goal else "short"
        return f"{verdict}: {value:.2f} (goal {goal_text}, against {other})"

    def memory():
        theirs = [by_column[c] for c in eager + compiled if ok(by_column.get(c))]
        if not theirs:
            return "no figure for PyTorch"
        lowest = min(theirs, key=lambda r: r["device_mem_peak_bytes"])
        mine = by_column[best]["device_mem_peak_bytes"]
        verdict = "met" if mine <= lowest["device_mem_peak_bytes"] else "short"
        return (f"{verdict}: {mine / GIB:.2f} GiB against {lowest['device_mem_peak_bytes'] / GIB:.2f}"
                f" ({column(lowest)})")
    return [f"{best}: {rate:.0f}/s", speed(eager, EAGER_GOAL, f">= {EAGER_GOAL:.2f}", "PyTorch eager"),
            speed(compiled, 1.0 + 1e-9, "> 1", "torch.compile"), memory()]


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


PRECISIONS = ["tf32", "fp32", "bf16", "fp16"]


def tables(records):
    runs = [r for r in records if r["record"] == "throughput"]
    devices = device_peaks(records)
    known = [OURS, "pytorch-eager", "pytorch-compile"]
    columns = sorted({column(r) for r in runs},
                     key=lambda c: (known.index(c) if c in known else len(known), c))
    others = [c for c in columns if c != OURS]
    # Files of several runs on one GPU merge into one table (a machine lent for 10 minutes a
    # command measures the columns in turns): a measurement fills its cell whatever came before,
    # a run that gave none only a cell that holds no measurement yet.
    groups = {}
    for r in runs:
        cell = groups.setdefault(config_key(r), {})
        if ok(r) or not ok(cell.get(column(r))):
            cell[column(r)] = r

    def order(key):
        world, ddp, stem, size, batch, classes, optimizer, precision = key
        rank = PRECISIONS.index(precision) if precision in PRECISIONS else len(PRECISIONS)
        return (world, ddp, size, stem, batch, classes, optimizer, rank)
    keys = sorted(groups, key=order)

    def describe_config(key):
        world, ddp, stem, size, batch, classes, optimizer, precision = key
        return [f"{world}" + (" (DDP)" if ddp else ""),
                f"{size}x{size}, {stem} stem, {classes} classes", batch, optimizer, precision]
    config_header = ["GPUs", "images", "batch/GPU", "optimizer", "precision"]

    def rate(r):
        return f"{r['images_per_s_per_gpu']:.0f}"

    def ratio(by, other):
        if ok(by.get(OURS)) and ok(by.get(other)):
            return f"{by[OURS]['images_per_s_per_gpu'] / by[other]['images_per_s_per_gpu']:.2f}"
        return "-"

    def tflops_and_mfu(r):
        mfu = mfu_of(r, devices)
        mfu_text = "unknown" if mfu is None else f"{100 * mfu:.1f}%"
        return f"{r['tflops_per_gpu']:.1f} ({mfu_text})"

    def memory(r):
        text = f"{r['device_mem_peak_bytes'] / GIB:.2f}"
        if r.get("torch_max_allocated_bytes") is not None:
            text += (f" (allocated {r['torch_max_allocated_bytes'] / GIB:.2f}, reserved "
                     f"{r['torch_max_reserved_bytes'] / GIB:.2f})")
        elif r.get("activation_bytes") is not None:
            text += (f" (model {r['model_bytes'] / GIB:.2f}, activations "
                     f"{r['activation_bytes'] / GIB:.2f}, workspace "
                     f"{r['conv_workspace_bytes'] / GIB:.2f}, "
                     + (f"input {r['input_bytes'] / GIB:.2f}, "
                        if r.get("input_bytes") is not None else "")
                     + f"search {r['search_workspace_bytes'] / GIB:.2f})")
        return text

    ratio_columns = [f"{OURS} / {other}" for other in others] if OURS in columns else []
    # Every variant of ours (BatchNorm kernels, graphs, layout) is a flag a user can set: the
    # fastest one measured for a configuration, named, against each of PyTorch's.
    # PyTorch's side likewise at its fastest layout: eager in channels_last where it was run so.
    def family(name):
        return [c for c in columns if c == name or c.startswith(name + " (")]
    theirs = [name for name in ("pytorch-eager", "pytorch-compile") if family(name)]
    ours = family(OURS) + [c for c in columns if c.startswith(OURS + "-")]
    best_columns = ([f"fastest {OURS} variant / fastest {other}" for other in theirs]
                    if len(ours) > 1 or any(len(family(name)) > 1 for name in theirs) else [])

    def best_ratio(by, other):
        best, best_theirs = fastest(by, ours), fastest(by, family(other))
        if best is None or best_theirs is None:
            return "-"
        variant = best[len(OURS):].lstrip("-").strip() or "plain"
        value = by[best]["images_per_s_per_gpu"] / by[best_theirs]["images_per_s_per_gpu"]
        layout = best_theirs[len(other):].strip(" ()")
        return f"{value:.2f} ({variant}" + (f" vs {layout}" if layout else "") + ")"

    goals = [describe_config(k) + goal_cells(groups[k], ours, family("pytorch-eager"),
                                             family("pytorch-compile"))
             for k in keys]
    met = sum(1 for row in goals if all(cell.startswith("met") for cell in row[-3:]))
    throughput = [describe_config(k) + cells(groups[k], columns, rate) +
                  ([ratio(groups[k], other) for other in others] if ratio_columns else []) +
                  [best_ratio(groups[k], other) for other in theirs if best_columns]
                  for k in keys]
    arithmetic = [describe_config(k) + cells(groups[k], columns, tflops_and_mfu) for k in keys]
    memories = [describe_config(k) + cells(groups[k], columns, memory) for k in keys]
    parts = ["data", "forward_backward", "comm_exposed", "optimizer", "idle"]
    steps = []
    for k in keys:
        for c in columns:
            r = groups[k].get(c)
            if ok(r):
                split = r.get("split_ms") or {}
                steps.append(describe_config(k) + [c, f"{r['step_ms']:.2f}"] +
                             [f"{split[p]:.2f}" if split.get(p) is not None else "not measured"
                              for p in parts])
    # A convolution cuDNN's graph API has no plan for runs on the legacy API's algorithm, so a
    # graph-API run's figure means what it says only with how many convolutions were on plans.
    graph_api = [describe_config(k) + [c, str(r["conv_graph_plans"]),
                                       str(r["conv_legacy_algorithms"]),
                                       f"{r['setup_s']:.1f}" if r.get("setup_s") is not None
                                       else "not measured",
                                       r.get("conv_graph_fallback") or "none fell back"]
                 for k in keys for c in columns
                 for r in [groups[k].get(c)]
                 if ok(r) and r.get("conv_api") == "graph" and "conv_graph_plans" in r]
    graph_section = [
        "### Convolutions on cuDNN's graph API (--conv-api graph)", "",
        markdown_table(config_header + ["implementation", "on graph-API plans",
                                        "on legacy algorithms", "set-up, s",
                                        "why the first fell back"], graph_api), "",
    ] if graph_api else []
    return "\n".join([
        "### Goals: the fastest resnet_ddp variant against PyTorch", "",
        f"At least {EAGER_GOAL:.1f}x the images/s of PyTorch eager (its fastest layout), ahead of "
        "torch.compile, and peak device memory no higher than the lowest of PyTorch's runs of "
        f"the configuration. All three met in {met} of {len(goals)} configurations.", "",
        markdown_table(config_header + ["fastest resnet_ddp variant", "over eager",
                                        "over torch.compile", "peak memory"], goals), "",
        "### Images/s per GPU (median window)", "",
        markdown_table(config_header + columns + ratio_columns + best_columns, throughput), "",
        "### TFLOP/s per GPU (MFU against the dense peak of the precision)", "",
        markdown_table(config_header + columns, arithmetic), "",
        "### Peak device memory, GiB (cudaMemGetInfo in use beyond the CUDA context; "
        "PyTorch's allocator peaks in brackets, resnet_ddp's memory plan likewise)", "",
        markdown_table(config_header + columns, memories), "",
        "### Step time, ms (means per step; CUDA events on the compute stream)", "",
        markdown_table(config_header + ["implementation", "step", "data wait",
                                        "forward+backward", "exposed communication",
                                        "optimizer", "GPU idle between steps"], steps), "",
    ] + graph_section)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--check", action="store_true",
                        help="only check that the implementations counted the same models")
    args = parser.parse_args(argv)
    records = read_records(args.files)
    problems = model_mismatches(records)
    if args.check:
        models = {model_key(r) for r in records if "flops_per_image" in r}
        for problem in problems:
            print(f"model mismatch: {problem}")
        if not problems:
            print(f"compare_throughput.py: every implementation counted the same parameters "
                  f"and FLOPs for each of {len(models)} model(s)")
        return 1 if problems else 0
    for problem in problems:
        print(f"**Model mismatch, the rows below compare different models**: {problem}\n")
    gpus = sorted({r.get("gpu", "unknown") for r in records if r["record"] == "throughput"})
    if len(gpus) > 1:
        print(f"**Records of several GPUs ({', '.join(gpus)}), merged into one table: give the "
              f"files of one GPU**\n")
    print(tables(records))
    return 1 if problems or len(gpus) > 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
