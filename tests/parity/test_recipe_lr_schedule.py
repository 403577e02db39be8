"""The learning rate of every step: bench/pytorch_recipe.py against resnet_ddp, both on the CPU,
with the cosine schedule and a warm-up. scripts/gpu_check.sh's fashion part compares the two
programs' accuracies after a cosine decay, which means something only if both decay alike.

The settings make the schedule's corners count: 38 images in batches of 8 give 5 steps an
epoch, the last one smaller; a warm-up of half an epoch is 2.5 steps, which resnet_ddp rounds
to 3 (std::llround) where Python's round() would give 2. Both programs log every step with
--log-json in the same number format (printf's %.9g), so the rates must match as text.

The losses are compared loosely: the two sides start from different initial weights and draw
different crops and flips, and 5 steps of 8 images leave much noise. The check catches a loss
on another scale or a run that diverges, not a small difference in training.
"""
import json
import os
import subprocess
import sys
import tempfile

SOURCE_DIR = os.environ.get("RDDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("RDDP_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
DATA = os.environ.get("RDDP_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
BASE_LR = 1e-3
SETTINGS = ["--data", DATA, "--device", "cpu", "--epochs", "2", "--batch-size", "8", "--limit-train", "38",
            "--limit-val", "16", "--seed", "0", "--lr", str(BASE_LR), "--lr-schedule", "cosine",
            "--warmup-epochs", "0.5"]
STEPS = 10
WARMUP_STEPS = 3
# Relative gap allowed between the two sides' mean training loss of an epoch. They measured
# 0.1 % and 0.9 % apart; a loss summed over the batch instead of averaged (8 times larger) or a
# diverging run lands far outside 25 %, and no draw of initial weights or crops should.
LOSS_TOLERANCE = 0.25


def run(name, command, log_json):
    result = subprocess.run(command, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    if result.returncode != 0:
        sys.exit(f"FAILED: {name} exited {result.returncode}:\n$ {' '.join(command)}\n"
                 f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    with open(log_json) as f:
        records = [json.loads(line) for line in f]
    # The rates as written, text for text: parsing them would let a difference hide in rounding.
    with open(log_json) as f:
        rates = [line.split('"lr":', 1)[1].split(",", 1)[0] for line in f if '"type":"step"' in line]
    steps = [r for r in records if r["type"] == "step"]
    epochs = [r for r in records if r["type"] == "epoch"]
    return [r["global_step"] for r in steps], rates, [r["train_loss"] for r in epochs]


def main():
    program = os.path.join(BUILD_DIR, "resnet_ddp")
    if not os.access(program, os.X_OK):
        sys.exit(f"FAILED: {program} is missing: build it first (cmake --build build)")
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        sys.exit(f"FAILED: no Fashion-MNIST in {DATA}: install Debian's dataset-fashion-mnist "
                 "(scripts/setup.sh does) or set RDDP_FASHION_MNIST")
    recipe = os.path.join(SOURCE_DIR, "bench", "pytorch_recipe.py")
    with tempfile.TemporaryDirectory() as tmp:
        ours_json, theirs_json = os.path.join(tmp, "resnet_ddp.jsonl"), os.path.join(tmp, "pytorch.jsonl")
        ours = run("resnet_ddp", [program, *SETTINGS, "--num-workers", "1", "--print-every", "1",
                                  "--log-json", ours_json], ours_json)
        theirs = run("bench/pytorch_recipe.py", [sys.executable, recipe, *SETTINGS, "--log-json", theirs_json],
                     theirs_json)

    failures = []
    ours_steps, ours_rates, ours_losses = ours
    theirs_steps, theirs_rates, theirs_losses = theirs
    expected_steps = list(range(1, STEPS + 1))
    if ours_steps != expected_steps or theirs_steps != expected_steps:
        failures.append(f"logged steps: resnet_ddp {ours_steps}, PyTorch {theirs_steps}, expected {expected_steps}")
    print(f"{'step':>4}  {'resnet_ddp lr':>15}  {'PyTorch lr':>15}")
    for step, (a, b) in enumerate(zip(ours_rates, theirs_rates), 1):
        print(f"{step:>4}  {a:>15}  {b:>15}{'' if a == b else '  DIFFERENT'}")
    if ours_rates != theirs_rates:
        failures.append("the learning rates differ")
    # Both sides could agree on the wrong schedule: check its shape against the settings.
    rates = [float(r) for r in ours_rates]
    if len(rates) == STEPS:
        if rates[0] != float(format(BASE_LR / WARMUP_STEPS, ".9g")) or rates[WARMUP_STEPS - 1] != BASE_LR:
            failures.append(f"warm-up: expected {WARMUP_STEPS} steps rising to {BASE_LR}, got {rates[:WARMUP_STEPS + 1]}")
        decay = rates[WARMUP_STEPS:]
        if decay[0] != BASE_LR or any(b >= a for a, b in zip(decay, decay[1:])) or decay[-1] > BASE_LR / 10:
            failures.append(f"cosine: expected a fall from {BASE_LR} to near 0, got {decay}")

    print(f"mean training loss per epoch: resnet_ddp {ours_losses}, PyTorch {theirs_losses}")
    if len(ours_losses) != 2 or len(theirs_losses) != 2:
        failures.append("not every epoch logged its training loss")
    for epoch, (a, b) in enumerate(zip(ours_losses, theirs_losses), 1):
        if not abs(a - b) <= LOSS_TOLERANCE * b:
            failures.append(f"epoch {epoch}: training loss {a} against PyTorch's {b}, over {LOSS_TOLERANCE:.0%} apart")

    for failure in failures:
        print(f"FAILED: {failure}")
    if not failures:
        print(f"PASSED: the same {len(ours_rates)} learning rates; training losses within {LOSS_TOLERANCE:.0%}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
