#!/usr/bin/env python3
"""PyTorch's convolutions beside ours: every convolution that bench/kernels_bench timed through
cuDNN's legacy and graph APIs (its JSON lines, "record": "conv"), timed again the way PyTorch
runs it, on the same GPU, and the three side by side with their sums per training step.

    pytorch_convs.py KERNELS_BENCH_OUTPUT [--device cuda|cpu] [--batch N] [--warmup 10]
                     [--runs 200] [--json FILE]

PyTorch's side is what its training step calls: torch.nn.functional.conv2d forward, and
torch.ops.aten.convolution_backward for the input's gradient and for the weight's, each alone
(output_mask), on tensors in torch.channels_last with torch.backends.cudnn.benchmark on, so
that cuDNN's timed choice is PyTorch's own. bf16 rows run on bfloat16 tensors (autocast's
convolutions are exactly these: bfloat16 inputs and weights), fp16 rows (what kernels_bench times
in their place on a GPU without bfloat16, such as a V100) on float16 tensors; tf32 rows on
float32 tensors with torch.backends.cudnn.allow_tf32. Each direction: --warmup calls (the first runs the timed
search), then --runs calls, each between its own pair of CUDA events, all queued before one
wait, the median counting: as kernels_bench times ours. A call whose GPU work is shorter than
Python's time to launch it (tens of µs) would count some of that time too; at 224x224, batch
256, few are. A row PyTorch cannot run says why, and the sums leave its shape out on
every side.

The per-step sums weigh each row by how often a step runs its shape and leave out the rows
kernels_bench times only to show what adding onto the gradient costs ("data +="), as its own
sums do. They say whether PyTorch's cuDNN picks faster convolutions than ours for the same
shapes: the part of the step time gap that no kernel of ours can close.

--device cpu runs the same on the CPU (with --batch, on few images), which checks this script
and nothing of any GPU. Without a CUDA device and without --device cpu it prints SKIPPED and
exits 0.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
GEOMETRY = ("batch", "in_channels", "size", "out_channels", "kernel", "stride", "pad")
# Our sides of a row, as kernels_bench's records name them, and the table's titles.
OURS = (("legacy_us", "ours, legacy API"), ("graph_us", "ours, graph API"))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels_bench_output",
                        help="kernels_bench's output (its JSON lines of record 'conv' are read)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--batch", type=int, default=0,
                        help="images per convolution (default: kernels_bench's)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", metavar="FILE", help="also write one JSON line a row here")
    args = parser.parse_args(argv)
    for name in ("batch", "warmup", "runs"):
        least = 0 if name != "runs" else 1
        if getattr(args, name) < least:
            parser.error(f"--{name} must be >= {least}, got {getattr(args, name)}")
    return args


def read_records(path):
    """kernels_bench's convolution records, in its order; exits, naming the file and line, on a
    bad one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as text:
            lines = text.readlines()
    except OSError as error:
        sys.exit(f"pytorch_convs.py: cannot read {path}: {error.strerror}")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.startswith('{"record":"conv"'):
            continue
        try:
            record = json.loads(line)
            for key in GEOMETRY + ("count",):
                least = 0 if key == "pad" else 1
                if not isinstance(record[key], int) or record[key] < least:
                    raise ValueError(f"{key} must be a whole number >= {least}, "
                                     f"got {record[key]!r}")
            if record["precision"] not in DTYPES:
                raise ValueError(f"precision must be one of {sorted(DTYPES)}, "
                                 f"got {record['precision']!r}")
            if record["direction"] not in ("forward", "data", "data +=", "filter"):
                raise ValueError(f"unknown direction {record['direction']!r}")
            missing = [key for key in ("name", "in_step_sum", "legacy_us", "graph_us")
                       if key not in record]
            if missing:
                raise ValueError(f"no {', '.join(missing)}")
        except (ValueError, KeyError, TypeError) as error:
            what = f"no {error}" if isinstance(error, KeyError) else str(error)
            sys.exit(f"pytorch_convs.py: {path}, line {number}: a convolution record it cannot "
                     f"read ({what}); it should be kernels_bench's own output")
        records.append(record)
    if not records:
        sys.exit(f"pytorch_convs.py: {path} holds no convolution record ('{{\"record\":\"conv\"'"
                 f" lines): give it the output of a kernels_bench that ran its convolutions")
    return records


class Timer:
    """Median microseconds a call, measured as kernels_bench measures ours: every call between
    its own pair of CUDA events, all of them queued back to back before one wait, so that the
    host runs ahead of the GPU and its time to launch is not counted as long as a call's GPU
    work outlasts it."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def median_microseconds(self, call, runs):
        if not self.cuda:
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                call()
                times.append((time.perf_counter() - start) * 1e6)
            return statistics.median(times)
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(runs)]
        for start, stop in pairs:
            start.record()
            call()
            stop.record()
        torch.cuda.synchronize()
        return statistics.median(start.elapsed_time(stop) * 1e3 for start, stop in pairs)


def direction_calls(geometry, precision, device):
    """The calls of a shape's directions, on tensors filled once; forward and the two halves of
    convolution_backward."""
    batch, cin, size, cout, kernel, stride, pad = geometry
    dtype = DTYPES[precision]
    # Drawn where they are used: on the CPU, the largest inputs would take seconds of the
    # GPU's time to draw and copy over.
    generator = torch.Generator(device=device).manual_seed(41)

    def tensor(*shape):
        values = torch.randn(*shape, generator=generator, device=device).to(dtype)
        return values.contiguous(memory_format=torch.channels_last)

    out = (size + 2 * pad - kernel) // stride + 1
    x, w, dy = tensor(batch, cin, size, size), tensor(cout, cin, kernel, kernel), \
        tensor(batch, cout, out, out)
    backward = torch.ops.aten.convolution_backward

    def gradient(mask):
        return lambda: backward(dy, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0],
                                1, mask)

    return {
        "forward": lambda: F.conv2d(x, w, None, stride, pad),
        "data": gradient([True, False, False]),
        "filter": gradient([False, True, False]),
    }


def geometry_of(record, args):
    return tuple(args.batch if key == "batch" and args.batch else record[key] for key in GEOMETRY)


def time_pytorch(records, args, device):
    """PyTorch's median microseconds by (precision, geometry, direction), or the reason a shape
    could not run."""
    timer = Timer(device)
    times = {}
    for precision in dict.fromkeys(r["precision"] for r in records):
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        # A shape's directions are adjacent rows: its operands are drawn once for them, and only
        # one shape's are held at a time.
        shape, calls = None, None
        for record in records:
            if record["precision"] != precision or record["direction"] == "data +=":
                continue
            geometry = geometry_of(record, args)
            key = (precision, geometry, record["direction"])
            try:
                if geometry != shape:
                    calls = direction_calls(geometry, precision, device)
                    shape = geometry
                call = calls[record["direction"]]
                for _ in range(args.warmup):
                    call()
                times[key] = timer.median_microseconds(call, args.runs)
            except RuntimeError as error:  # a type or shape this build of PyTorch lacks
                times[key] = str(error).splitlines()[0]
    return times


def ratio(ours, theirs):
    return f"{ours / theirs:.3f}" if ours and theirs else "-"


def cell(value):
    return f"{value:.1f}" if value is not None else "not measured"


def report(records, times, args):
    """Prints a table a precision, with its per-step sums; returns the rows with PyTorch's
    figure added."""
    rows = []
    for record in records:
        theirs = times.get((record["precision"], geometry_of(record, args), record["direction"]))
        rows.append(dict(record, batch=geometry_of(record, args)[0],
                         pytorch_us=theirs if isinstance(theirs, float) else None,
                         pytorch_error=theirs if isinstance(theirs, str) else None))
    for precision in dict.fromkeys(row["precision"] for row in rows):
        mine = [row for row in rows if row["precision"] == precision]
        ours = list(OURS)
        print(f"\n### {precision}: median µs a call; ratio = ours / PyTorch's (above 1: PyTorch's "
              "is faster)\n")
        print("| convolution | direction | a step | PyTorch | "
              + " | ".join(f"{title} | ratio" for _, title in ours) + " |")
        print("|---|---|---:|---:|" + "---:|---:|" * len(ours))
        for row in mine:
            theirs = "-" if row["direction"] == "data +=" else cell(row["pytorch_us"])
            print(f"| {row['name']} | {row['direction']} | {row['count']} | {theirs} | "
                  + " | ".join(f"{cell(row.get(side))} | {ratio(row.get(side), row['pytorch_us'])}"
                               for side, _ in ours) + " |")
        # A shape missing a figure on any side is left out of every side's sum.
        sides = ["pytorch_us"] + [side for side, _ in ours]
        summed = [row for row in mine if row["in_step_sum"]]
        incomplete = {row["name"]: row["pytorch_error"] or "ours not measured" for row in summed
                      if any(row.get(side) is None for side in sides)}
        sums = {side: sum(row["count"] * row[side] for row in summed
                          if row["name"] not in incomplete)
                for side in sides}
        print(f"| per training step | all | | {sums['pytorch_us']:.1f} | "
              + " | ".join(f"{sums[side]:.1f} | {ratio(sums[side], sums['pytorch_us'])}"
                           for side, _ in ours) + " |")
        for name, why in incomplete.items():
            print(f"\n{name}: left out of the sums: {why}")
    return rows


def main(argv):
    args = parse_args(argv)
    records = read_records(args.kernels_bench_output)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: pytorch_convs.py: no CUDA device answers (--device cpu runs it on the "
              "CPU)")
        return 0
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU"
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, on {where}; "
          f"{len(records)} rows of {args.kernels_bench_output}"
          + (f"; batch {args.batch} instead of kernels_bench's" if args.batch else ""))
    times = time_pytorch(records, args, device)
    rows = report(records, times, args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
