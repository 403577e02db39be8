#!/usr/bin/env python3
"""Turns a resnet_ddp --log-json file into a PNG of the loss, accuracy and throughput curves.

    scripts/plot_metrics.py metrics.jsonl [more.jsonl ...] -o metrics.png [--labels fp32 bf16]

Several files are overlaid (e.g. two precisions of the same recipe). Needs matplotlib
(Debian: python3-matplotlib); scripts/find_python.sh matplotlib finds a Python that has it.
"""
import argparse
import json
import os
import subprocess
import sys


def rerun_under_python_with_matplotlib():
    """The python3 first on PATH (a virtual environment, say) may lack matplotlib while Debian's
    has it: run this script again under the first Python that has it, once."""
    if os.environ.get("RDDP_PLOT_RERUN"):
        return
    finder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "find_python.sh")
    found = subprocess.run([finder, "matplotlib"], capture_output=True, text=True)
    python = found.stdout.strip()
    if found.returncode != 0 or not python:
        return
    os.environ["RDDP_PLOT_RERUN"] = "1"
    os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])


def read_log(path):
    steps, epochs = [], []
    with open(path) as stream:
        for number, line in enumerate(stream, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"{path}:{number}: not a JSON line ({error}); is this a --log-json file?")
            kind = record.get("type")
            if kind == "step":
                steps.append(record)
            elif kind == "epoch":
                epochs.append(record)
    if not steps and not epochs:
        sys.exit(f"{path}: no step or epoch records; was it written by resnet_ddp --log-json?")
    return steps, epochs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="--log-json files")
    parser.add_argument("-o", "--output", default="metrics.png", help="PNG to write (default metrics.png)")
    parser.add_argument("--labels", nargs="*", help="one label per file (default: the file names)")
    args = parser.parse_args()
    labels = args.labels or [os.path.basename(path) for path in args.logs]
    if len(labels) != len(args.logs):
        sys.exit("--labels needs one label per log file")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        rerun_under_python_with_matplotlib()
        sys.exit("matplotlib is missing: install python3-matplotlib (Debian), or pip install "
                 "matplotlib into the Python that runs this script")

    figure, (loss_axis, accuracy_axis, speed_axis) = plt.subplots(1, 3, figsize=(15, 4.2))
    for path, label in zip(args.logs, labels):
        steps, epochs = read_log(path)
        if steps:
            x = [s["global_step"] for s in steps]
            loss_axis.plot(x, [s["loss"] for s in steps], alpha=0.5, label=f"{label} train (window)")
            accuracy_axis.plot(x, [100 * s["accuracy"] for s in steps], alpha=0.5, label=f"{label} train (window)")
            # Logs written by other tools in this format may leave the speed out.
            timed = [s for s in steps if "images_per_s" in s]
            if timed:
                speed_axis.plot([s["global_step"] for s in timed], [s["images_per_s"] for s in timed], label=label)
        if epochs:
            x = [e["global_step"] for e in epochs]
            loss_axis.plot(x, [e["val_loss"] for e in epochs], "o-", label=f"{label} validation")
            accuracy_axis.plot(x, [100 * e["val_accuracy"] for e in epochs], "o-", label=f"{label} validation")
            # Top-5 where the log has it and it says something (more than five classes).
            top5 = [e.get("val_top5_accuracy") for e in epochs]
            if None not in top5 and min(top5) < 1.0:
                accuracy_axis.plot(x, [100 * a for a in top5], "o--", label=f"{label} validation top-5")
    loss_axis.set(title="loss", xlabel="step", ylabel="cross-entropy")
    accuracy_axis.set(title="accuracy", xlabel="step", ylabel="%")
    speed_axis.set(title="throughput", xlabel="step", ylabel="images/s (all ranks)")
    for axis in (loss_axis, accuracy_axis, speed_axis):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
