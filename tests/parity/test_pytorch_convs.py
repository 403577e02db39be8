"""bench/pytorch_convs.py, which times PyTorch's convolutions beside the ones kernels_bench timed
of ours, run here on the CPU on few images: it reads kernels_bench's records (and refuses bad
ones, naming the file and line), times what a PyTorch training step calls (checked against
autograd: the forward, and each gradient alone), and sums a step as kernels_bench does.

kernels_bench itself needs a GPU; the keys its records carry are checked against the ones the
script reads, in the source of bench/kernels_bench.cu.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

SOURCE_DIR = os.environ.get("RDDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import numbered_checks  # noqa: E402
import pytorch_convs  # noqa: E402
from numbered_checks import check  # noqa: E402

SCRIPT = os.path.join(SOURCE_DIR, "bench", "pytorch_convs.py")


def record(precision, name, geometry, count, direction, legacy, graph, in_step_sum=True):
    batch, cin, size, cout, kernel, stride, pad = geometry
    fields = {"record": "conv", "precision": precision, "name": name, "batch": batch,
              "in_channels": cin, "size": size, "out_channels": cout, "kernel": kernel,
              "stride": stride, "pad": pad, "count": count, "direction": direction,
              "in_step_sum": in_step_sum, "layout": "nhwc", "legacy_us": legacy,
              "legacy_algorithm": 1, "graph_us": graph,
              "graph_engine": None if graph is None else 7}
    return fields


STEM = (256, 3, 20, 8, 7, 2, 3)
BLOCK = (256, 8, 10, 8, 3, 1, 1)
DOWN = (256, 8, 10, 16, 1, 2, 0)
RECORDS = [
    record("tf32", "stem", STEM, 1, "forward", 50.0, 40.0),
    record("tf32", "stem", STEM, 1, "filter", 60.0, 55.0),
    record("tf32", "block", BLOCK, 4, "forward", 10.0, 9.0),
    record("tf32", "block", BLOCK, 4, "data", 11.0, 10.0),
    record("tf32", "block", BLOCK, 4, "data +=", 12.0, 11.0, in_step_sum=False),
    record("tf32", "block", BLOCK, 4, "filter", 13.0, 12.0),
    record("tf32", "down", DOWN, 1, "forward", 5.0, None),
    record("bf16", "block", BLOCK, 4, "forward", 8.0, 7.0),
    record("bf16", "block", BLOCK, 4, "filter", 9.0, 8.0),
]


def run(path, *flags):
    return subprocess.run([sys.executable, SCRIPT, path, *flags], capture_output=True, text=True,
                          timeout=300)


def the_calls_are_what_a_training_step_runs():
    """Each timed call computes what autograd computes for a convolution: the forward, the
    input's gradient, the weight's."""
    for precision, tolerance in (("tf32", 1e-5), ("bf16", 2e-2)):
        geometry = (2, 8, 10, 16, 3, 2, 1)
        calls = pytorch_convs.direction_calls(geometry, precision, torch.device("cpu"))
        # The same tensors, regenerated: the calls close over them.
        generator = torch.Generator().manual_seed(41)
        dtype = pytorch_convs.DTYPES[precision]
        x, w = (torch.randn(*shape, generator=generator).to(dtype)
                for shape in ((2, 8, 10, 10), (16, 8, 3, 3)))
        dy = torch.randn(2, 16, 5, 5, generator=generator).to(dtype)
        x, w = x.double().requires_grad_(), w.double().requires_grad_()
        y = F.conv2d(x, w, None, 2, 1)
        (y * dy.double()).sum().backward()
        pairs = {"forward": (calls["forward"](), y), "data": (calls["data"]()[0], x.grad),
                 "filter": (calls["filter"]()[1], w.grad)}
        for direction, (ours, reference) in pairs.items():
            error = ((ours.double() - reference).norm() / reference.norm()).item()
            check(f"{precision} {direction}: the call computes autograd's "
                  f"{'output' if direction == 'forward' else 'gradient'} "
                  f"(relative error {error:.1e})", error < tolerance)
            if direction != "forward":
                check(f"{precision} {direction}: only that gradient is computed",
                      calls[direction]()[1 if direction == "data" else 0] is None)


def the_table_and_sums(workdir):
    path = os.path.join(workdir, "kernels_bench.txt")
    with open(path, "w") as out:
        out.write("kernels_bench on Stand-in GPU\n224x224 convolutions, tf32  direction ...\n")
        for r in RECORDS:
            out.write(json.dumps(r, separators=(",", ":")) + "\n")
    rows_path = os.path.join(workdir, "rows.jsonl")
    result = run(path, "--device", "cpu", "--batch", "2", "--warmup", "1", "--runs", "3",
                 "--json", rows_path)
    check("the script runs on the CPU", result.returncode == 0, result.stdout + result.stderr)
    text = result.stdout
    print(text)
    check("it says the batch is not kernels_bench's", "batch 2 instead of kernels_bench's" in text)
    check("a table a precision", "### tf32" in text and "### bf16" in text)
    check("the adding row has no PyTorch figure",
          re.search(r"^\| block \| data \+= \| 4 \| - \| 12\.0 \|", text, re.M) is not None)
    with open(rows_path) as rows_file:
        rows = [json.loads(line) for line in rows_file]
    check("one JSON row a record", len(rows) == len(RECORDS))
    check("PyTorch timed every row but the adding one, on 2 images",
          all((r["pytorch_us"] is None) == (r["direction"] == "data +=") and r["batch"] == 2
              for r in rows))
    # The step: the stem's two rows and the block's three, each weighted by its count; the
    # adding row left out, and the downsampling shape too, which the graph API lacks.
    summed = [r for r in rows if r["precision"] == "tf32" and r["name"] in ("stem", "block")
              and r["in_step_sum"]]
    expected = {side: sum(r["count"] * r[side] for r in summed)
                for side in ("pytorch_us", "legacy_us", "graph_us")}
    step = re.search(r"^\| per training step \| all \| \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) "
                     r"\| ([0-9.]+) \| ([0-9.]+) \|", text.split("### bf16")[0], re.M)
    check("a per-step row for tf32", step is not None)
    check(f"tf32's step sums count × µs of the complete shapes ({expected})",
          abs(float(step.group(1)) - expected["pytorch_us"]) < 0.1
          and float(step.group(2)) == expected["legacy_us"] == 50 + 60 + 4 * (10 + 11 + 13)
          and float(step.group(4)) == expected["graph_us"])
    check("its ratios are ours over PyTorch's",
          step.group(3) == f"{expected['legacy_us'] / expected['pytorch_us']:.3f}")
    check("a shape missing a figure is named as left out",
          "down: left out of the sums: ours not measured" in text)
    bf16_text = text.split("### bf16")[1]
    bf16 = [r for r in rows if r["precision"] == "bf16"]
    expected = {side: sum(r["count"] * r[side] for r in bf16)
                for side in ("pytorch_us", "legacy_us", "graph_us")}
    step = re.search(r"^\| per training step \| all \| \| ([0-9.]+) \| ([0-9.]+) \| [0-9.]+ "
                     r"\| ([0-9.]+) \| [0-9.]+ \|$", bf16_text, re.M)
    check("bf16's step sums both of our sides", step is not None, bf16_text)
    check(f"each is count × µs of its rows ({expected})",
          float(step.group(2)) == expected["legacy_us"] == 4 * (8 + 9)
          and float(step.group(3)) == expected["graph_us"] == 4 * (7 + 8))

def bad_inputs(workdir):
    empty = os.path.join(workdir, "empty.txt")
    with open(empty, "w") as out:
        out.write("kernels_bench on Stand-in GPU\nstem convolutions: not measured\n")
    result = run(empty, "--device", "cpu")
    check("a file without records is refused, naming it",
          result.returncode == 1 and empty in result.stderr and "holds no convolution record"
          in result.stderr, result.stderr)
    bad = os.path.join(workdir, "bad.txt")
    broken = dict(RECORDS[0], kernel=0)
    with open(bad, "w") as out:
        out.write("header\n" + json.dumps(RECORDS[1], separators=(",", ":")) + "\n"
                  + json.dumps(broken, separators=(",", ":")) + "\n")
    result = run(bad, "--device", "cpu")
    check("a bad record is refused, naming the file, the line and the field",
          result.returncode == 1 and f"{bad}, line 3" in result.stderr and "kernel" in
          result.stderr, result.stderr)
    unknown = os.path.join(workdir, "unknown.txt")
    with open(unknown, "w") as out:
        out.write(json.dumps(dict(RECORDS[0], precision="fp64"), separators=(",", ":")) + "\n")
    result = run(unknown, "--device", "cpu")
    check("an unknown precision is refused",
          result.returncode == 1 and "precision must be one of" in result.stderr, result.stderr)
    result = run(os.path.join(workdir, "missing.txt"), "--device", "cpu")
    check("a missing file is refused, naming it",
          result.returncode == 1 and "missing.txt" in result.stderr, result.stderr)
    result = run(empty, "--runs", "0")
    check("--runs 0 is refused", result.returncode == 2 and "--runs" in result.stderr)


def kernels_bench_writes_the_keys_read():
    with open(os.path.join(SOURCE_DIR, "bench", "kernels_bench.cu")) as source:
        text = source.read()
    body = text[text.index("std::string conv_record("):]
    body = body[:body.index("\n}\n")]
    written = set(re.findall(r'\.(?:string|integer|number|boolean|null)\("([a-z_]+)"', body))
    read = set(pytorch_convs.GEOMETRY) | {"record", "precision", "name", "count", "direction",
                                          "in_step_sum"} | {
        side for side, _ in pytorch_convs.OURS}
    check("kernels_bench's conv records carry every key the script reads",
          read <= written, f"missing: {sorted(read - written)}")


def main():
    torch.manual_seed(0)
    the_calls_are_what_a_training_step_runs()
    with tempfile.TemporaryDirectory() as workdir:
        the_table_and_sums(workdir)
        bad_inputs(workdir)
    kernels_bench_writes_the_keys_read()
    print(numbered_checks.summary())


if __name__ == "__main__":
    main()
