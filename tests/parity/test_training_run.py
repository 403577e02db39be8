"""Whole training runs of the resnet_ddp program against the same runs in PyTorch, on the CPU, on
real Fashion-MNIST images: one rank with AdamW, two ranks (mpiexec against
DistributedDataParallel over gloo) with SGD and momentum, three ranks with AdamW on sets that
three does not divide, which DistributedSampler pads, and one rank with SGD through torchvision's
own (imagenet) stem, keeping BatchNorm and biases out of weight decay (--no-decay-norm-bias against
a param group of weight_decay 0); the others use the cifar stem and decay every parameter.

Both sides start from one state_dict, see the same batches in the same order (DistributedSampler's
shuffle, reseeded every epoch, which resnet_ddp reproduces; a short last batch), follow a warm-up
and the cosine schedule, and evaluate after every epoch. The PyTorch side is
tests/parity/ddp_reference.py, written as a PyTorch user would write it. Each step, the
evaluations and the weights written at the end are compared:
  - the learning rate of every step, to the 9 digits resnet_ddp logs;
  - the loss of every step (on several ranks, the mean over the ranks' batches), the validation
    loss and the top-1 and top-5 accuracy of every epoch;
  - the BatchNorm running statistics after the last step (rank 0's, which DDP broadcasts);
  - what training changed: the parameters after the last step minus the initial ones, as
    ||ours - PyTorch|| / ||PyTorch|| over all of them.

The learning rates are small (1e-6). Any two float32 implementations of this network drift
apart at realistic rates: at AdamW's 1e-3, PyTorch's own float32 run differed from its float64
run by 2 % in loss within five steps, and by up to 5 % over 14. That drift says nothing about
which run is right. At 1e-6 the two runs stay within float32 rounding of each other for the
whole run, so the tolerances can be tight while every part of a run still acts. Faults put into
the PyTorch side on purpose, one at a time, each failed this test when it was written: the
schedule a step late or without its warm-up, two batches swapped, the short last batch dropped,
the same shuffle every epoch, gradients summed instead of averaged across ranks, no momentum, no
weight decay, BatchNorm buffers not broadcast before evaluation, one validation image left out;
added with the three-rank case, validation through a sampler that drops instead of pads;
with the imagenet-stem case, its max pooling left out; and, once that case took
--no-decay-norm-bias, resnet_ddp run without the flag (the parameters' change then differed by
0.31 of its norm, against 1.4e-4 with it).

The same comparison for the CUDA engine (scripts/gpu_check.sh runs it on a GPU):
  RDDP_TRAINING_RUN_DEVICE=cuda  resnet_ddp trains with --device cuda --precision fp32
                                 --deterministic: strict float32, no TF32; the PyTorch side stays
                                 the same CPU reference
  RDDP_TRAINING_RUN_GPUS=N       GPUs at hand (default 1): a case with more ranks is left out, as
                                 NCCL gives every rank a GPU of its own
  RDDP_TRAINING_RUN_PROGRAM=PATH the program to run (default: the build's resnet_ddp), e.g. the
                                 one built on the CUDA emulator (tests/emu/README.md)
  RDDP_TRAINING_RUN_FLAGS="..."  more flags for resnet_ddp, e.g. the fastest GPU ones
                                 (--batchnorm fused --memory-format nhwc --cuda-graphs on)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import torch

import rddp_tensors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import pytorch_recipe  # noqa: E402

BUILD = os.environ["RDDP_BUILD_DIR"]
SOURCE = os.environ["RDDP_SOURCE_DIR"]
DEVICE = os.environ.get("RDDP_TRAINING_RUN_DEVICE", "cpu")
PROGRAM = os.environ.get("RDDP_TRAINING_RUN_PROGRAM") or os.path.join(BUILD, "resnet_ddp")
FLAGS = os.environ.get("RDDP_TRAINING_RUN_FLAGS", "").split()
DATA = os.environ.get("RDDP_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_reference.py")
TIMEOUT = 300  # seconds a run may take (each takes under a minute on 2 cores)
SEED = 3
# 120 training images: batches of 32, 32, 32 and 24 on one rank, of 16, 16, 16 and 12 on each of
# two; 2 epochs; 64 validation images (a case may set its own counts).
SHARED = dict(epochs=2, lr_schedule="cosine", warmup_epochs=0.5, seed=SEED, limit_train=120,
              limit_val=64)
CASES = [
    dict(name="1 rank, AdamW", ranks=1, batch_size=32, optimizer="adamw", lr=1e-6, momentum=0.0,
         weight_decay=1e-2),
    # Weight decay 0.1, not the recipe's 1e-4, so that its share of each step is measurable.
    dict(name="2 ranks, SGD with momentum", ranks=2, batch_size=16, optimizer="sgd", lr=1e-6,
         momentum=0.9, weight_decay=0.1),
    # Sets that 3 does not divide: DistributedSampler pads 121 training images to 123 (41 a
    # rank: batches of 16, 16 and 9) and 64 validation images to 66 by repeating the first
    # ones, and the repeats count in the validation sums on both sides.
    dict(name="3 ranks, AdamW, padded shards", ranks=3, batch_size=16, optimizer="adamw", lr=1e-6,
         momentum=0.0, weight_decay=1e-2, limit_train=121, limit_val=64),
    # torchvision's own stem (7x7/2 convolution, 3x3/2 max pooling), which resnet_ddp chooses for
    # images over 64 px, through a whole run (on 28x28 images: 7x7 after the pooling). Ties in
    # the pooling, common on Fashion-MNIST's flat background, are not checked by it: there the
    # tied windows' inputs are equal too, so either choice gives the same gradients.
    # It also keeps BatchNorm and biases out of weight decay (--no-decay-norm-bias against a
    # param group of weight_decay 0): the other SGD case decays them.
    dict(name="1 rank, SGD with momentum, imagenet stem, no decay on BatchNorm and biases", ranks=1,
         batch_size=32, optimizer="sgd", lr=1e-6, momentum=0.9, weight_decay=0.1, stem="imagenet",
         no_decay_norm_bias=True),
]
# Worst relative errors allowed; what the runs measured when these were set is in the comments.
STEP_LOSS = 1e-5        # 6.5e-7 (AdamW), 1.4e-7 (SGD), 2.7e-7 (3 ranks), 2.5e-7 (imagenet stem)
VAL_LOSS = 1e-5         # 5e-8; 7.3e-8 (imagenet stem)
RUNNING_STATS = 2e-4    # 3e-5 (AdamW, also on 3 ranks), 8e-7 (SGD), 1e-6 (imagenet stem), against the channel's std
UPDATE = 0.05           # 1.2e-2 (AdamW), 3.9e-3 (SGD), 1.1e-2 (3 ranks), 1.4e-4 (imagenet stem)


def run(command, what, env=None):
    """Runs a program in a session of its own, so that on a hang its children (ranks) go too."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        sys.exit(f"FAILED: {what} did not end within {TIMEOUT} s:\n{' '.join(command)}\n{output[-4000:]}")
    if process.returncode != 0:
        sys.exit(f"FAILED: {what} exited with {process.returncode}:\n{' '.join(command)}\n{output[-4000:]}")
    return output


def mpiexec_prefix(ranks):
    """mpiexec -n RANKS, with Open MPI's leave to run as root and on fewer cores than ranks."""
    launcher = os.environ.get("RDDP_MPIEXEC") or shutil.which("mpiexec")
    if not launcher:
        sys.exit("FAILED: no mpiexec for the runs of several ranks: install openmpi-bin "
                 "(scripts/setup.sh)")
    version = subprocess.run([launcher, "--version"], capture_output=True, text=True).stdout
    flags = ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []
    return [launcher, "-n", str(ranks), *flags]


def settings_of(case):
    return {key: case.get(key, value) for key, value in SHARED.items()}


def run_ours(work, case, init):
    log, weights = os.path.join(work, "ours.jsonl"), os.path.join(work, "ours.rddp")
    shared = settings_of(case)
    command = [PROGRAM, "--device", DEVICE, "--data", DATA, "--augment", "none",
               "--epochs", str(shared["epochs"]), "--lr-schedule", shared["lr_schedule"],
               "--warmup-epochs", str(shared["warmup_epochs"]), "--seed", str(SEED),
               "--limit-train", str(shared["limit_train"]), "--limit-val", str(shared["limit_val"]),
               "--batch-size", str(case["batch_size"]), "--optimizer", case["optimizer"],
               "--lr", repr(case["lr"]), "--weight-decay", repr(case["weight_decay"]),
               "--init", init, "--log-json", log, "--print-every", "1", "--save-weights", weights,
               "--num-workers", "1", "--stem", case.get("stem", "cifar")]
    if case["optimizer"] == "sgd":
        command += ["--momentum", repr(case["momentum"])]
    if case.get("no_decay_norm_bias"):
        command += ["--no-decay-norm-bias"]
    if DEVICE == "cuda":
        command += ["--precision", "fp32", "--deterministic"]
    command += FLAGS
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    ranks = case["ranks"]
    run((mpiexec_prefix(ranks) if ranks > 1 else []) + command, f"resnet_ddp ({case['name']})", env=env)
    records = [json.loads(line) for line in open(log)]
    return ([r for r in records if r["type"] == "step"], [r for r in records if r["type"] == "epoch"],
            {name: torch.as_tensor(values) for name, values in rddp_tensors.read(weights).tensors.items()})


def run_pytorch(work, case, init):
    out = os.path.join(work, "pytorch")
    os.makedirs(out)
    settings = dict(settings_of(case), data=DATA, init=init, out=out, world=case["ranks"],
                    dtype="float32", stem=case.get("stem", "cifar"),
                    no_decay_norm_bias=case.get("no_decay_norm_bias", False),
                    threads=max(1, 2 // case["ranks"]),
                    **{key: case[key] for key in ("batch_size", "optimizer", "lr", "momentum", "weight_decay")})
    settings_path = os.path.join(work, "pytorch.json")
    with open(settings_path, "w") as stream:
        json.dump(settings, stream)
    run([sys.executable, REFERENCE, settings_path], f"PyTorch ({case['name']}, {REFERENCE})")
    # resnet_ddp logs the job's mean loss; DistributedSampler gives every rank equal batches, so
    # that is the plain mean of the ranks' own losses.
    per_rank = [[json.loads(line) for line in open(os.path.join(out, f"steps-rank{rank}.jsonl"))]
                for rank in range(case["ranks"])]
    steps = [dict(records[0], loss=sum(r["loss"] for r in records) / len(records))
             for records in zip(*per_rank)]
    epochs = [json.loads(line) for line in open(os.path.join(out, "epochs.jsonl"))]
    return steps, epochs, torch.load(os.path.join(out, "final.pt"))


def relative(value, truth):
    return abs(value - truth) / max(abs(truth), 1e-30)


def compare(case, init, ours, theirs):
    """Returns the failures; prints the worst figures."""
    name, failures = case["name"], []
    (o_steps, o_epochs, o_state), (t_steps, t_epochs, t_state) = ours, theirs
    if len(o_steps) != len(t_steps) or len(o_epochs) != len(t_epochs):
        return [f"{name}: resnet_ddp logged {len(o_steps)} steps and {len(o_epochs)} epochs, "
                f"PyTorch {len(t_steps)} and {len(t_epochs)}"]
    worst = (0.0, 0)
    for o, t in zip(o_steps, t_steps):
        step = t["global_step"]
        # resnet_ddp's log prints 9 significant digits.
        if o["global_step"] != step or relative(o["lr"], t["lr"]) > 1e-8:
            failures.append(f"{name}: step {step}: resnet_ddp logged step {o['global_step']} at lr "
                            f"{o['lr']!r}, PyTorch lr {t['lr']!r}")
        error = relative(o["loss"], t["loss"])
        if error > STEP_LOSS:
            failures.append(f"{name}: step {step}: loss {o['loss']:.9g}, PyTorch {t['loss']:.9g}: "
                            f"relative error {error:.1e} > {STEP_LOSS:.0e}")
        worst = max(worst, (error, step))
    print(f"{name}: {len(t_steps)} steps, loss {t_steps[0]['loss']:.5f} to {t_steps[-1]['loss']:.5f}; "
          f"worst relative error of a step's loss {worst[0]:.1e} (step {worst[1]})")

    for o, t in zip(o_epochs, t_epochs):
        epoch, error = t["epoch"], relative(o["val_loss"], t["val_loss"])
        # Accuracies are counts over the (padded) validation set: equal to the 9 digits logged.
        if (error > VAL_LOSS or relative(o["val_accuracy"], t["val_accuracy"]) > 1e-8
                or relative(o["val_top5_accuracy"], t["val_top5_accuracy"]) > 1e-8):
            failures.append(f"{name}: epoch {epoch}: validation loss {o['val_loss']:.9g} accuracy "
                            f"{o['val_accuracy']:.4f} top-5 {o['val_top5_accuracy']:.4f}, PyTorch "
                            f"{t['val_loss']:.9g} {t['val_accuracy']:.4f} {t['val_top5_accuracy']:.4f}")
        print(f"{name}: epoch {epoch}: validation loss {o['val_loss']:.6f} accuracy {o['val_accuracy']:.4f} "
              f"top-5 {o['val_top5_accuracy']:.4f}, PyTorch {t['val_loss']:.6f} {t['val_accuracy']:.4f} "
              f"{t['val_top5_accuracy']:.4f} (relative error {error:.1e})")

    worst, squares, reference = (0.0, "-"), 0.0, 0.0
    for key, start in init.items():
        if key not in o_state:
            failures.append(f"{name}: {key} is missing from resnet_ddp's weights")
            continue
        mine, truth = o_state[key].double().reshape(-1), t_state[key].double().reshape(-1)
        if key.endswith("num_batches_tracked"):
            if mine.tolist() != truth.tolist():
                failures.append(f"{name}: {key} is {mine.tolist()}, PyTorch's {truth.tolist()}")
        elif "running_" in key:
            # A mean is measured against its channel's standard deviation, a variance against itself.
            scale = truth if key.endswith("running_var") else t_state[key.replace("mean", "var")].double().sqrt()
            error = ((mine - truth).abs() / scale.abs().clamp_min(1e-30)).max().item()
            if error > RUNNING_STATS:
                failures.append(f"{name}: {key} after the last step: relative error {error:.1e} > {RUNNING_STATS:.0e}")
            worst = max(worst, (error, key))
        else:
            start = start.double().reshape(-1)
            squares += (mine - truth).pow(2).sum().item()
            reference += (truth - start).pow(2).sum().item()
    update_error = (squares / reference) ** 0.5 if reference > 0 else float("inf")
    if update_error > UPDATE:
        failures.append(f"{name}: the parameters' change over the run differs from PyTorch's by "
                        f"{update_error:.1e} of its norm > {UPDATE}")
    print(f"{name}: parameters' change over the run: relative error {update_error:.1e}; worst "
          f"BatchNorm running statistic {worst[0]:.1e} ({worst[1]})")
    return failures


def initial_weights(tmp, stem):
    """The starting state_dict of a stem's runs (the same seed for every stem), and its files as
    PyTorch and resnet_ddp read them: made once per stem."""
    init_pt, init = os.path.join(tmp, f"init-{stem}.pt"), os.path.join(tmp, f"init-{stem}.rddp")
    if not os.path.exists(init):
        torch.manual_seed(SEED)
        torch.save(pytorch_recipe.build_model(stem).state_dict(), init_pt)
        run([sys.executable, os.path.join(SOURCE, "scripts", "torchvision_to_resnet_ddp.py"), init_pt, init],
            "scripts/torchvision_to_resnet_ddp.py")
    return torch.load(init_pt), init_pt, init


def main():
    if not os.path.isdir(DATA):
        if os.environ.get("RDDP_REQUIRE_PARITY") == "1":
            sys.exit(f"FAILED: {DATA} is missing: install dataset-fashion-mnist (scripts/setup.sh)")
        print(f"SKIPPED: {DATA} is missing: install dataset-fashion-mnist (scripts/setup.sh)")
        sys.exit(77)
    if DEVICE not in ("cpu", "cuda"):
        sys.exit(f"FAILED: RDDP_TRAINING_RUN_DEVICE must be cpu or cuda, not '{DEVICE}'")
    cases = CASES
    if DEVICE == "cuda":
        gpus = int(os.environ.get("RDDP_TRAINING_RUN_GPUS", "1"))
        cases = [case for case in CASES if case["ranks"] <= gpus]
        for case in CASES:
            if case not in cases:
                print(f"SKIPPED: {case['name']}: {case['ranks']} ranks need {case['ranks']} GPUs, "
                      f"RDDP_TRAINING_RUN_GPUS={gpus}")
    print(f"resnet_ddp: {PROGRAM} --device {DEVICE} {' '.join(FLAGS)}".rstrip())
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, case in enumerate(cases):
            work = os.path.join(tmp, f"case{index}")
            os.makedirs(work)
            state, init_pt, init = initial_weights(tmp, case.get("stem", "cifar"))
            failures += compare(case, state, run_ours(work, case, init), run_pytorch(work, case, init_pt))
    for failure in failures:
        print("FAILED:", failure)
    if failures:
        sys.exit(1)
    print(f"{len(cases)} training run{'s' if len(cases) > 1 else ''} on {DEVICE} match PyTorch's")


if __name__ == "__main__":
    main()
