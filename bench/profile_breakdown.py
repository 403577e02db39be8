#!/usr/bin/env python3
"""GPU kernel time per training step by category (convolutions, BatchNorm, pooling, ...), side
by side for several profiled programs, from Nsight Systems' kernel summaries: where one
program's step spends its kernel time and where another's differs.

    profile_breakdown.py --steps N NAME=CSV [NAME=CSV ...]
        a markdown report on stdout: a table with one row per category and one column per
        program (ms per step, share of that program's kernel time), the differences against the
        first program, then the longest kernels of each category in each program
      --baseline NAME        differences against NAME instead of the first program
      --top K                kernels listed per category and program (5)
      --output FILE          the report to FILE instead of stdout
      --table-output FILE    also the category tables alone to FILE (what a summary embeds)
    profile_breakdown.py --classify <NAMES
        the category of each kernel name read from stdin, one a line: "category<TAB>name"
        (to check where a kernel lands after editing CATEGORIES)

Each CSV is what `nsys stats --report cuda_gpu_kern_sum --format csv PROFILE.nsys-rep` prints
(`gpukernsum` in nsys before 2023), or, where a machine has Nsight Compute but no Nsight Systems,
what `ncu --import PROFILE.ncu-rep --csv --page raw --print-units base` prints for a profile of
the metric gpu__time_duration.sum: one row per kernel launch (a "Kernel Name" column and that
metric's, a row of units under the header), summed here by name; ncu's details page (its CSV
without --page raw: a row per metric and launch, with "Metric Name", "Metric Unit" and "Metric
Value" columns) is read too. N is the number of training
steps the profile collected. Lines before the table's header (nsys's "Generating SQLite file",
"Processing [...] with [...]", ncu's "==PROF==" lines) are skipped; the table ends at a blank
line. Standard library only, Python 3.9 or newer.
"""
import argparse
import csv
import re
import sys
from dataclasses import dataclass, field


def ours(*names):
    """A pattern for kernels of kernels/*.cu: nsys names them
    rddp::cuda::(anonymous namespace)::NAME<...>, Nsight Compute's summaries NAME<...>."""
    return r"^(?:rddp::cuda::(?:\(anonymous namespace\)::)?)?(?:%s)\b" % "|".join(names)


# (category, patterns): a kernel belongs to the first category with a pattern that matches its
# name (case-insensitively, searched anywhere, template arguments included; without the "void"
# before it and the parameter list after it). Order matters where names overlap: the
# convolutions' implicit GEMMs must come before the fc layer's GEMMs, and BatchNorm, pooling,
# the loss and the casts before the catch-alls for PyTorch's elementwise kernels and Triton's
# (Inductor names a fused kernel after all its operations: one with a BatchNorm in it counts as
# BatchNorm). A kernel of kernels/*.cu must land somewhere else than "other":
# tests/cli/test_profile_breakdown.sh checks every __global__ function there.
CATEGORIES = [
    ("convolution forward", [
        r"fprop",                                  # sm90_xmma_fprop_implicit_gemm_..., cutlass's
        r"^(?!.*(?:dgrad|wgrad)).*implicit_gemm",  # an implicit GEMM named neither dgrad nor wgrad
        r"(?:implicit|explicit|precomputed)_convolve",  # cuDNN's pre-Hopper forward kernels
        r"conv2d_grouped_direct|convolve_common_engine|winogradForward",
        r"\bcomputeOffsetsKernel",                 # the index table a forward implicit GEMM reads
    ]),
    ("convolution backward data", [
        r"dgrad",                                  # sm90_xmma_dgrad_..., strided_dgrad helpers
    ]),
    ("convolution backward filter", [
        r"wgrad",                                  # sm90_xmma_wgrad_..., winogradWgrad*,
                                                   # computeWgradSplitKOffsetsKernel
        r"ReduceSplitK",                           # cutlass's split-K reduction behind a wgrad
    ]),
    ("GEMM (fc layer)", [
        # cuBLAS's and cuBLASLt's kernels (a convolution cuDNN ran as a plain GEMM would count
        # here too: the convolutions' own kernels say fprop, dgrad, wgrad or implicit_gemm)
        r"gemm|gemv|^nvjet|cutlass|cublas|splitKreduce",
    ]),
    ("BatchNorm", [
        r"batch_?norm",                            # PyTorch's batch_norm_*, Triton's
                                                   # *_native_batch_norm_*, cuDNN's nhwcBatchNorm*
        r"\bbn_(?:fw|bw)",                         # cuDNN's bn_fw_tr_1C11_*, bn_bw_1C11_*
        ours("batch_moments_kernel", "finish_moments_kernel", "normalize_kernel",
             "grad_sums_kernel", "finish_grad_sums_kernel", "data_grad_kernel"),
    ]),
    ("pooling", [
        r"max_?pool|av(?:g|erage)_?pool",          # PyTorch's max_pool_*, adaptive_average_pool,
                                                   # avg_pool2d_*; Triton's *_max_pool2d_*
        r"MeanOps",                                # eager's adaptive_avg_pool2d to 1x1 is a mean
        r"^triton_\w*_fused_mean_",                # and Inductor's, a reduction named after it
        ours("maxpool_forward_kernel", "maxpool_backward_kernel", "maxpool_forward_nhwc_kernel",
             "maxpool_backward_nhwc_kernel", "global_avgpool_forward_kernel",
             "global_avgpool_backward_kernel", "global_avgpool_forward_nhwc_kernel",
             "global_avgpool_backward_nhwc_kernel"),
    ]),
    ("loss (softmax, cross-entropy, metrics)", [
        r"softmax|nll_loss|cross_entropy",         # cunn_SoftMaxForward, Triton's *_log_softmax_*
        ours("softmax_xent_rows", "softmax_xent_finish", "accumulate_metrics_kernel"),
    ]),
    ("optimizer (and loss scaling)", [
        r"multi_tensor_apply|fused_adamw|_foreach|amp_update_scale|non_finite_check",
        ours("adamw_kernel", "sgd_kernel", "scale_kernel", "find_non_finite_kernel",
             "begin_step_kernel"),
    ]),
    ("casts and layout", [
        r"direct_copy_kernel|\bcopy_",            # PyTorch's copies and casts (not Inductor's
                                                   # *__to_copy_add_*: an add with a cast in it)
        r"^triton_\w+_fused__to_copy(?:_(?:clone|convolution|t|view|permute))*_\d+$",
        r"nchwToNhwc|nhwcToNchw|transpose|convertTensor",
        ours("compress_bf16_kernel", "decompress_bf16_kernel", "convert_kernel",
             "nchw_to_nhwc_kernel", "pixels_to_input_kernel", "weights_to_ohwi_kernel",
             "ohwi_to_oihw_kernel"),
    ]),
    ("elementwise (ReLU, add)", [
        r"elementwise_kernel|^triton_poi_|op_tensor_kernel",
        ours("relu_forward_kernel", "relu_backward_kernel", "add_kernel", "add_relu_kernel",
             "broadcast_rows_kernel"),
    ]),
    ("reductions and other Triton", [
        r"reduce_kernel|^triton_",                 # triton_red_, triton_per_, PyTorch's sums
    ]),
]
OTHER = "other"
CATEGORY_NAMES = [name for name, _ in CATEGORIES] + [OTHER]
COMPILED = [(name, [re.compile(p, re.IGNORECASE) for p in patterns])
            for name, patterns in CATEGORIES]

SHORT_NAME_LENGTH = 90
TIME_UNITS_NS = {"ns": 1.0, "us": 1e3, "\u00b5s": 1e3, "\u03bcs": 1e3, "ms": 1e6, "s": 1e9}
COUNT_COLUMNS = {"instances", "calls", "numcalls", "count"}
NAME_COLUMNS = {"name", "kernelname", "kernel"}
EXPECTED = ("a CSV header with a 'Total Time' and a 'Name' column, as "
            "`nsys stats --report cuda_gpu_kern_sum --format csv` prints, or with a "
            "'Kernel Name' and a 'gpu__time_duration.sum' column, as "
            "`ncu --import PROFILE --csv --page raw` prints")
NCU_DURATION = "gpu__time_duration.sum"
NCU_NAME = "kernelname"
# The units ncu writes under its header (--print-units base gives nsecond).
NCU_UNITS_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
                "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class InputError(Exception):
    pass


@dataclass
class Kernel:
    name: str
    total_ns: float
    launches: int


@dataclass
class Program:
    name: str
    path: str
    kernels: list = field(default_factory=list)

    def by_category(self):
        """{category: [kernels]}, each list longest first."""
        groups = {name: [] for name in CATEGORY_NAMES}
        for kernel in self.kernels:
            groups[classify(kernel.name)].append(kernel)
        for kernels in groups.values():
            kernels.sort(key=lambda k: (-k.total_ns, k.name))
        return groups

    def total_ns(self):
        return sum(k.total_ns for k in self.kernels)

    def launches(self):
        return sum(k.launches for k in self.kernels)


def without_signature(name):
    """The kernel's name without the return type and parameter list nsys prints around it:
    "void ns::kernel<T>(int, T *)" gives "ns::kernel<T>". Parentheses inside template
    arguments (PyTorch's lambdas) stay: only the last balanced group at the end goes."""
    name = re.sub(r"^void\s+", "", name.strip())
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i].rstrip() if i > 0 else name
    return name


def classify(name):
    bare = without_signature(name)
    for category, patterns in COMPILED:
        if any(p.search(bare) for p in patterns):
            return category
    return OTHER


def short_name(name):
    """A name for a table: no signature, no rddp::cuda, at::native or anonymous namespaces
    (cuDNN's and cuBLAS's stay: they say whose kernel it is), cut to SHORT_NAME_LENGTH."""
    text = without_signature(name).replace("(anonymous namespace)::", "")
    text = re.sub(r"\b(?:rddp::cuda|at::native)::", "", text)
    text = re.sub(r"\s+", " ", text)
    if len(text) > SHORT_NAME_LENGTH:
        text = text[:SHORT_NAME_LENGTH - 3] + "..."
    return text.replace("|", "\\|")


# --- reading nsys's and ncu's CSV ------------------------------------------------------------

def squeezed(column):
    return re.sub(r"\s+", "", column.replace("\ufeff", "")).lower()


def header_columns(fields):
    """(total column, its unit in ns, count column, name column) where FIELDS is the kernel
    summary's header, else None. nsys 2023 and later: "Time (%)", "Total Time (ns)",
    "Instances", "Avg (ns)", ..., "Name"; older: "Time(%)", "Total Time", "Instances" or
    "Calls", "Average", ..., "Name". A total without a unit is in ns, nsys's default."""
    total = unit = count = name = None
    for index, column in enumerate(squeezed(f) for f in fields):
        match = re.fullmatch(r"totaltime(?:\(([^)]*)\))?", column)
        if match and total is None:
            total, unit = index, TIME_UNITS_NS.get(match.group(1) or "ns")
        elif column in COUNT_COLUMNS and count is None:
            count = index
        elif column in NAME_COLUMNS and name is None:
            name = index
    if total is None or name is None:
        return None
    return total, unit, count, name


def parse_line(line):
    try:
        return next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return []


def number(text, path, line_number, column):
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        raise InputError(f"{path} line {line_number}: {column} is {text!r}, not a number; "
                         f"expected {EXPECTED}") from None


def ncu_columns(fields):
    """(duration column, name column) where FIELDS is the header of ncu's raw page, else None."""
    squeezed_fields = [squeezed(f) for f in fields]
    if NCU_DURATION not in squeezed_fields or NCU_NAME not in squeezed_fields:
        return None
    return squeezed_fields.index(NCU_DURATION), squeezed_fields.index(NCU_NAME)


def ncu_detail_columns(fields):
    """(name, metric name, unit, value) columns where FIELDS is the header of ncu's details page
    (one row per metric and launch, what ncu prints without --page raw), else None."""
    squeezed_fields = [squeezed(f) for f in fields]
    wanted = (NCU_NAME, "metricname", "metricunit", "metricvalue")
    if not all(column in squeezed_fields for column in wanted):
        return None
    return tuple(squeezed_fields.index(column) for column in wanted)


def read_summary(path):
    """The kernels of one kernel summary in CSV: nsys's, or ncu's launches summed by name."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise InputError(f"{path}: cannot read it ({error.strerror})") from None
    for index, line in enumerate(lines):
        fields = parse_line(line)
        columns = header_columns(fields) if len(fields) > 1 else None
        if columns:
            return kernels_after_header(path, lines, index, fields, columns)
        ncu = ncu_columns(fields) if len(fields) > 1 else None
        if ncu:
            return launches_after_ncu_header(path, lines, index, fields, ncu)
        details = ncu_detail_columns(fields) if len(fields) > 1 else None
        if details:
            return launches_after_ncu_details(path, lines, index, fields, details)
    raise InputError(f"{path}: no kernel summary table in it: expected {EXPECTED}"
                     f"{hint_for_unknown(lines)}")


def hint_for_unknown(lines):
    text = "\n".join(lines)
    if "does not contain CUDA kernel data" in text or "SKIPPED" in text:
        return " (nsys says the profile holds no CUDA kernels: did the capture range run?)"
    if re.search(r"Total Time", text):
        return " (this looks like nsys's column format: run nsys stats with --format csv)"
    if not text.strip():
        return " (the file is empty)"
    return ""


def table_rows(path, lines, first, width):
    """(line number, fields) of each row from lines[first] to the first blank line; every row
    must have the header's `width` fields."""
    for index in range(first, len(lines)):
        if not lines[index].strip():
            return
        fields = parse_line(lines[index])
        if len(fields) != width:
            raise InputError(f"{path} line {index + 1}: {len(fields)} fields where the header "
                             f"has {width}: {lines[index][:120]!r}")
        yield index + 1, fields


def add_launches(by_name, name, total_ns, launches):
    kernel = by_name.setdefault(name, Kernel(name, 0.0, 0))
    kernel.total_ns += total_ns
    kernel.launches += launches


def kernels_after_header(path, lines, header_index, header, columns):
    total_at, unit_ns, count_at, name_at = columns
    if unit_ns is None:
        raise InputError(f"{path} line {header_index + 1}: unknown time unit in "
                         f"{header[total_at]!r}; expected ns, us, ms or s")
    if count_at is None:
        raise InputError(f"{path} line {header_index + 1}: the header has no launch count "
                         f"column (Instances or Calls): {', '.join(header)}")
    by_name = {}
    for line_number, fields in table_rows(path, lines, header_index + 1, len(header)):
        total = number(fields[total_at], path, line_number, repr(header[total_at])) * unit_ns
        launches = number(fields[count_at], path, line_number, repr(header[count_at]))
        add_launches(by_name, fields[name_at].strip(), total, int(round(launches)))
    if not by_name:
        raise InputError(f"{path} line {header_index + 1}: the kernel summary has a header "
                         "but no rows")
    return list(by_name.values())


def ncu_unit_ns(text, path, line_number):
    """Nanoseconds in one of ncu's time units, as it names them in its units row or column."""
    unit = text.strip()
    if unit not in NCU_UNITS_NS:
        raise InputError(f"{path} line {line_number}: unknown unit {unit!r} of {NCU_DURATION}; "
                         "expected nsecond (ncu --print-units base), usecond, msecond or second")
    return NCU_UNITS_NS[unit]


def launches_after_ncu_header(path, lines, header_index, header, columns):
    """ncu's raw page: one row per launch, summed by kernel name. The row under the header
    holds the units where ncu printed them; without it the durations are in ns, ncu's base."""
    duration_at, name_at = columns
    unit_ns, first = 1.0, header_index + 1
    if first < len(lines):
        fields = parse_line(lines[first])
        if len(fields) == len(header) and not fields[name_at].strip():
            unit_ns, first = ncu_unit_ns(fields[duration_at], path, first + 1), first + 1
    by_name = {}
    for line_number, fields in table_rows(path, lines, first, len(header)):
        duration = number(fields[duration_at], path, line_number, NCU_DURATION) * unit_ns
        add_launches(by_name, fields[name_at].strip(), duration, 1)
    if not by_name:
        raise InputError(f"{path} line {header_index + 1}: ncu's table has a header but no "
                         "launches (did the profiled range run any kernel?)")
    return list(by_name.values())


def launches_after_ncu_details(path, lines, header_index, header, columns):
    """ncu's details page: the rows of gpu__time_duration.sum, one per launch, each with its
    unit, summed by kernel name."""
    name_at, metric_at, unit_at, value_at = columns
    by_name = {}
    for line_number, fields in table_rows(path, lines, header_index + 1, len(header)):
        if fields[metric_at].strip() != NCU_DURATION:
            continue
        unit_ns = ncu_unit_ns(fields[unit_at], path, line_number)
        duration = number(fields[value_at], path, line_number, NCU_DURATION) * unit_ns
        add_launches(by_name, fields[name_at].strip(), duration, 1)
    if not by_name:
        raise InputError(f"{path} line {header_index + 1}: ncu's details page has no "
                         f"{NCU_DURATION} rows (was the metric collected?)")
    return list(by_name.values())


# --- the report ---------------------------------------------------------------------------

def ms(ns, steps):
    return f"{ns / steps / 1e6:.3f}"


def signed_ms(ns, steps):
    value = round(ns / steps / 1e6, 3)
    return "0.000" if value == 0 else f"{value:+.3f}"


def share(part, whole):
    return f"{100.0 * part / whole:.1f} %" if whole > 0 else "-"


def per_step(count, steps):
    value = count / steps
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def table(header, rows, align):
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def category_table(programs, totals, steps):
    rows = []
    for category in CATEGORY_NAMES:
        rows.append([category] + [f"{ms(totals[p.name][category], steps)} "
                                  f"({share(totals[p.name][category], p.total_ns())})"
                                  for p in programs])
    rows.append(["**all kernels**"] + [f"**{ms(p.total_ns(), steps)}**" for p in programs])
    rows.append(["kernel launches"] + [per_step(p.launches(), steps) for p in programs])
    return table(["category"] + [p.name for p in programs], rows,
                 ["l"] + ["r"] * len(programs))


def difference_table(programs, baseline, totals, steps):
    others = [p for p in programs if p.name != baseline.name]
    rows = []
    for category in CATEGORY_NAMES:
        base = totals[baseline.name][category]
        rows.append([category] + [signed_ms(totals[p.name][category] - base, steps)
                                  for p in others])
    rows.append(["**all kernels**"] + [f"**{signed_ms(p.total_ns() - baseline.total_ns(), steps)}**"
                                       for p in others])
    rows.append(["kernel launches"] + [per_step_signed(p.launches() - baseline.launches(), steps)
                                       for p in others])
    return table(["category"] + [f"{p.name} - {baseline.name}" for p in others], rows,
                 ["l"] + ["r"] * len(others))


def per_step_signed(count, steps):
    text = per_step(abs(count), steps)
    return "0" if count == 0 else ("+" if count > 0 else "-") + text


def summary_lines(programs, baseline, totals, steps):
    lines = [f"GPU kernel time per training step (ms; in brackets, the share of the program's "
             f"kernel time), from the profiler's kernel summary over {steps} profiled steps:",
             ""]
    lines += category_table(programs, totals, steps)
    if len(programs) > 1:
        lines += ["", f"Against {baseline.name} (ms per step; + where a program spends more "
                      f"than {baseline.name}):", ""]
        lines += difference_table(programs, baseline, totals, steps)
    return lines


def kernel_lines(programs, groups, steps, top):
    lines = ["## The longest kernels of each category", "",
             f"Each program's {top} longest kernels of the category, by time per step. Names "
             "without return type, parameters and the rddp::cuda, at::native and anonymous "
             f"namespaces, cut at {SHORT_NAME_LENGTH} characters."]
    for category in CATEGORY_NAMES:
        if not any(groups[p.name][category] for p in programs):
            continue
        rows = []
        for program in programs:
            kernels = groups[program.name][category]
            for kernel in kernels[:top]:
                rows.append([program.name, ms(kernel.total_ns, steps),
                             per_step(kernel.launches, steps),
                             f"{kernel.total_ns / max(kernel.launches, 1) / 1e3:.1f}",
                             f"`{short_name(kernel.name)}`"])
            rest = kernels[top:]
            if rest:
                rows.append([program.name, ms(sum(k.total_ns for k in rest), steps),
                             per_step(sum(k.launches for k in rest), steps), "",
                             f"({len(rest)} more {'kernel' if len(rest) == 1 else 'kernels'})"])
        lines += ["", f"### {category}", ""]
        lines += table(["program", "ms per step", "launches per step", "us per launch",
                        "kernel"], rows, ["l", "r", "r", "r", "l"])
    return lines


def report(programs, baseline, steps, top):
    """(the whole report, the category tables alone) as lists of lines."""
    groups = {p.name: p.by_category() for p in programs}
    totals = {p.name: {c: sum(k.total_ns for k in groups[p.name][c]) for c in CATEGORY_NAMES}
              for p in programs}
    summary = summary_lines(programs, baseline, totals, steps)
    sources = [f"- {p.name}: `{p.path}`" for p in programs]
    whole = (["# GPU kernel time per step by category", ""] + summary +
             ["", "Kernel time adds up each kernel's duration: kernels that overlap count in "
                  "full and the GPU's idle time not at all, so it is not the step's wall time. "
                  "The categories are the patterns of CATEGORIES in bench/profile_breakdown.py; "
                  "the kernel summaries:", ""] + sources + [""] +
             kernel_lines(programs, groups, steps, top))
    return whole, summary


# --- the command line ---------------------------------------------------------------------

def program_argument(text):
    name, equals, path = text.partition("=")
    if not equals or not name or not path:
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=CSV (e.g. "
                                         "resnet_ddp=profile-resnet_ddp.csv)")
    return Program(name, path)


def positive(text):
    if not re.fullmatch(r"[0-9]+", text) or int(text) == 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number above 0")
    return int(text)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(
        prog="profile_breakdown.py",
        description="GPU kernel time per step by category, from nsys kernel summaries in CSV "
                    "(or ncu's raw page of gpu__time_duration.sum).")
    parser.add_argument("programs", nargs="*", type=program_argument, metavar="NAME=CSV",
                        help="a program's name and its `nsys stats --report cuda_gpu_kern_sum "
                             "--format csv` output (or `ncu --import ... --csv --page raw`'s)")
    parser.add_argument("--steps", type=positive, help="training steps the profiles collected")
    parser.add_argument("--baseline", help="the program the differences are against "
                                           "(default: the first)")
    parser.add_argument("--top", type=positive, default=5,
                        help="kernels listed per category and program (5)")
    parser.add_argument("--output", help="write the report here instead of stdout")
    parser.add_argument("--table-output", help="also write the category tables alone here")
    parser.add_argument("--classify", action="store_true",
                        help="print the category of each kernel name read from stdin")
    args = parser.parse_args(argv)
    if args.classify:
        return args
    if not args.programs:
        parser.error("name at least one program as NAME=CSV")
    if args.steps is None:
        parser.error("--steps N is needed: the number of training steps the profiles collected")
    names = [p.name for p in args.programs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        parser.error(f"program named twice: {', '.join(duplicates)}")
    if args.baseline is not None and args.baseline not in names:
        parser.error(f"--baseline {args.baseline}: no such program; the programs are "
                     f"{', '.join(names)}")
    return args


def write(path, lines):
    text = "\n".join(lines) + "\n"
    if path is None:
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        raise InputError(f"{path}: cannot write it ({error.strerror})") from None


def main(argv):
    args = parse_arguments(argv)
    if args.classify:
        for line in sys.stdin:
            if line.strip():
                print(f"{classify(line.strip())}\t{line.strip()}")
        return 0
    try:
        for program in args.programs:
            program.kernels = read_summary(program.path)
        baseline = next(p for p in args.programs
                        if p.name == (args.baseline or args.programs[0].name))
        whole, summary = report(args.programs, baseline, args.steps, args.top)
        write(args.output, whole)
        if args.table_output:
            write(args.table_output, summary)
    except InputError as error:
        print(f"profile_breakdown.py: {error}", file=sys.stderr)
        return 1
    if args.output:
        print(f"wrote {args.output}" + (f" and {args.table_output}" if args.table_output else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
