#!/usr/bin/env python3
"""Overlays the training and validation curves of the same recipe trained in several precisions
(resnet_ddp --log-json files) in one PNG, and judges whether mixed precision changed what the
model learned:

    scripts/plot_precision_curves.py fp32=fp32.jsonl tf32=tf32.jsonl bf16=bf16.jsonl \\
        fp16=fp16.jsonl -o precision.png [--reference fp32] [--title TEXT]

Prints a Markdown table (final validation accuracy and loss per precision, their gaps to the
reference, the largest accuracy gap over the epochs, fp16's skipped steps) and a verdict.

The rule: every run's final validation accuracy within --max-accuracy-gap points (1.0) of the
reference's, and its final validation loss within --max-loss-gap (0.2, i.e. 20 %) of the
reference's, relative. Why these bounds: the runs share the seed, the data order and the
augmentation, so the only difference is rounding; once rounding has nudged the first weights
the trajectories part as if seeded differently, and on Fashion-MNIST a change of seed moves the
final accuracy by a few tenths of a point. A broken precision path (wrong rounding, a loss
scale that never recovers, an accumulation in 16 bits) costs whole points or diverges. The
loss gets a relative bound because it is small near the end and its run-to-run spread grows
with it. Earlier epochs are shown but not judged: before the learning rate has decayed,
seed-like noise is larger than either bound. Every run must also have finished its epochs with
finite numbers.

Exit status: 0 when every run passes, 1 when one fails or cannot be judged, 2 for bad
arguments or unreadable files. The table and verdict need only the standard library; the PNG
needs matplotlib (scripts/find_python.sh matplotlib finds a Python that has it); --no-plot
leaves the PNG out.
"""
import argparse
import json
import math
import os
import re
import sys

# resnet_ddp prints numbers with printf's %.9g, which writes non-finite values as nan, -nan,
# inf or -inf: not JSON. They are read as NaN/Infinity so that a diverged run is judged, not
# refused as a broken file.
NON_FINITE = re.compile(r'(?<=[:\[,])\s*(-?)(nan|inf)\b', re.IGNORECASE)


def parse_line(line):
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        def replace(match):
            sign = match.group(1)
            return "NaN" if match.group(2).lower() == "nan" else f"{sign}Infinity"
        return json.loads(NON_FINITE.sub(replace, line))


def read_run(path):
    """(step records, epoch records) of one --log-json file; exits 2 on a file that is not one."""
    steps, epochs = [], []
    try:
        stream = open(path, encoding="utf-8")
    except OSError as error:
        usage_error(f"{path}: cannot read it ({error.strerror})")
    with stream:
        for number, line in enumerate(stream, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = parse_line(line)
            except json.JSONDecodeError as error:
                usage_error(f"{path}:{number}: not a JSON line ({error}); is this a resnet_ddp --log-json file?")
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "step":
                steps.append(record)
            elif kind == "epoch":
                # --log-json appends: a second run into the same file starts its epochs again,
                # and its curves would be drawn over the first run's.
                if epochs and record.get("epoch", 0) <= epochs[-1].get("epoch", 0):
                    usage_error(f"{path}:{number}: epoch {record.get('epoch')} follows epoch "
                                f"{epochs[-1].get('epoch')}: the file holds more than one run "
                                "(--log-json appends); delete it before the run")
                epochs.append(record)
    if not epochs:
        usage_error(f"{path}: no epoch records; was it written by resnet_ddp --log-json, and did "
                    "the run finish an epoch?")
    return steps, epochs


def usage_error(message):
    print(f"plot_precision_curves.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_runs(specs):
    runs = []
    for spec in specs:
        label, separator, path = spec.partition("=")
        if not separator or not label or not path:
            usage_error(f"'{spec}': give each run as LABEL=FILE, e.g. fp32=fp32.jsonl")
        if any(label == known for known, _ in runs):
            usage_error(f"label '{label}' is given twice")
        runs.append((label, path))
    return runs


def finite(*values):
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def judge(runs, reference, max_accuracy_gap, max_loss_gap):
    """Rows of the table and the failures, from {label: (steps, epochs)}."""
    ref_epochs = runs[reference][1]
    ref_last = ref_epochs[-1]
    rows, failures = [], []
    if not finite(ref_last["val_accuracy"], ref_last["val_loss"]):
        failures.append(f"{reference} (the reference) ended with a non-finite validation loss or accuracy")
    for label, (_, epochs) in runs.items():
        last = epochs[-1]
        accuracy, loss = 100 * last["val_accuracy"], last["val_loss"]
        accuracy_gap = accuracy - 100 * ref_last["val_accuracy"]
        loss_gap = (loss - ref_last["val_loss"]) / ref_last["val_loss"] if ref_last["val_loss"] else float("nan")
        # The largest accuracy gap over the epochs both runs have.
        per_epoch = [abs(100 * (mine["val_accuracy"] - theirs["val_accuracy"]))
                     for mine, theirs in zip(epochs, ref_epochs)]
        largest = max(per_epoch) if per_epoch else float("nan")
        skipped = sum(e.get("skipped_steps", 0) for e in epochs) if any("skipped_steps" in e for e in epochs) else None
        verdict = "reference" if label == reference else "pass"
        if label != reference:
            problems = []
            if len(epochs) != len(ref_epochs):
                problems.append(f"{len(epochs)} epochs where {reference} has {len(ref_epochs)}")
            if not finite(accuracy, loss, last["train_loss"]):
                problems.append("non-finite loss or accuracy")
            else:
                if not abs(accuracy_gap) <= max_accuracy_gap:
                    problems.append(f"final accuracy {accuracy_gap:+.2f} points from {reference} "
                                    f"(bound {max_accuracy_gap:g})")
                if not abs(loss_gap) <= max_loss_gap:
                    problems.append(f"final validation loss {100 * loss_gap:+.1f} % from {reference} "
                                    f"(bound {100 * max_loss_gap:g} %)")
            if problems:
                verdict = "FAIL"
                failures.extend(f"{label}: {problem}" for problem in problems)
        rows.append((label, len(epochs), accuracy, loss, accuracy_gap, loss_gap, largest, skipped, verdict))
    return rows, failures


def table(rows, reference):
    lines = [f"| precision | epochs | final val acc % | final val loss | acc gap to {reference} (points) "
             f"| loss gap to {reference} | largest acc gap over epochs | skipped steps | verdict |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for label, count, accuracy, loss, accuracy_gap, loss_gap, largest, skipped, verdict in rows:
        gaps = ("", "", "") if label == reference else (f"{accuracy_gap:+.2f}", f"{100 * loss_gap:+.1f} %", f"{largest:.2f}")
        lines.append(f"| {label} | {count} | {accuracy:.2f} | {loss:.4f} | {gaps[0]} | {gaps[1]} | {gaps[2]} "
                     f"| {'' if skipped is None else int(skipped)} | {verdict} |")
    return "\n".join(lines)


def plot(runs, output, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        usage_error("matplotlib is missing: install python3-matplotlib, run under "
                    "$(scripts/find_python.sh matplotlib), or pass --no-plot")
    figure, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    (train_loss, val_loss), (train_accuracy, val_accuracy) = axes
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (label, (steps, epochs)) in enumerate(runs.items()):
        colour = colours[index % len(colours)]
        # A line style per run too: runs that agree to the pixel would otherwise hide each other.
        style = "o" + ("-", "--", ":", "-.")[index % 4]
        if steps:
            x = [s["global_step"] for s in steps]
            train_loss.plot(x, [s["loss"] for s in steps], color=colour, alpha=0.35, linewidth=1)
            train_accuracy.plot(x, [100 * s["accuracy"] for s in steps], color=colour, alpha=0.35, linewidth=1)
        x = [e["global_step"] for e in epochs]
        # Epoch means over the whole epoch, drawn over the noisier per-window curves.
        train_loss.plot(x, [e["train_loss"] for e in epochs], style, color=colour, label=label)
        train_accuracy.plot(x, [100 * e["train_accuracy"] for e in epochs], style, color=colour, label=label)
        val_loss.plot(x, [e["val_loss"] for e in epochs], style, color=colour, label=label)
        val_accuracy.plot(x, [100 * e["val_accuracy"] for e in epochs], style, color=colour, label=label)
    train_loss.set(title="training loss (lines: --print-every windows; dots: epoch means)", ylabel="cross-entropy")
    val_loss.set(title="validation loss (after each epoch)", ylabel="cross-entropy")
    train_accuracy.set(title="training accuracy", xlabel="step", ylabel="%")
    val_accuracy.set(title="validation accuracy", xlabel="step", ylabel="%")
    for axis in axes.flat:
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(output, dpi=80)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="LABEL=FILE", help="a --log-json file per precision")
    parser.add_argument("-o", "--output", default="precision-curves.png", help="PNG to write")
    parser.add_argument("--reference", help="the label the others are compared with (default: the first)")
    parser.add_argument("--max-accuracy-gap", type=float, default=1.0,
                        help="bound on |final val accuracy - the reference's|, in points (1.0)")
    parser.add_argument("--max-loss-gap", type=float, default=0.2,
                        help="bound on |final val loss - the reference's| / the reference's (0.2)")
    parser.add_argument("--title", default="The same recipe in several precisions",
                        help="the figure's title: say which device trained the runs")
    parser.add_argument("--no-plot", action="store_true", help="print the table and verdict only")
    args = parser.parse_args()
    if not args.max_accuracy_gap >= 0 or not args.max_loss_gap >= 0:
        usage_error("--max-accuracy-gap and --max-loss-gap must be zero or more")
    specs = parse_runs(args.runs)
    reference = args.reference or specs[0][0]
    if reference not in dict(specs):
        usage_error(f"--reference {reference}: no run has that label (labels: {', '.join(l for l, _ in specs)})")
    runs = {label: read_run(path) for label, path in specs}

    rows, failures = judge(runs, reference, args.max_accuracy_gap, args.max_loss_gap)
    print(table(rows, reference))
    print()
    print(f"rule: final validation accuracy within {args.max_accuracy_gap:g} points and final validation "
          f"loss within {100 * args.max_loss_gap:g} % of {reference}'s, every number finite")
    if not args.no_plot:
        plot(runs, args.output, args.title)
        print(f"curves: {os.path.abspath(args.output)}")
    if len(runs) == 1:
        failures.append(f"only {reference} was given: nothing to compare it with")
    for failure in failures:
        print(f"FAIL: {failure}")
    print("verdict: " + ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
