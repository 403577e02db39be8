"""Whole-network parity with PyTorch: same weights, same batch -> logits, loss, every parameter
gradient, BatchNorm running statistics after the step, and the parameters after one AdamW and
one SGD step.

The reference is torchvision's resnet18 run in float64. Our CPU executor runs the case twice:
in float64, where it must agree to ~1e-9 (the maths is the same, only summation order
differs), and in float32, where it must be as close to the float64 truth as PyTorch's own
float32 run is (within a small factor). The worst relative error of each check is printed.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torchvision

import rddp_tensors

BUILD_DIR = os.environ["RDDP_BUILD_DIR"]
TOOL = os.path.join(BUILD_DIR, "tests", "parity", "parity_step")

# (name, stem, in_channels, classes, batch, height, width, label_smoothing)
CASES = [
    ("imagenet-3ch-1000cls-64x64", "imagenet", 3, 1000, 2, 64, 64, 0.0),
    ("imagenet-1ch-10cls-72x56", "imagenet", 1, 10, 3, 72, 56, 0.1),
    ("cifar-3ch-10cls-32x32", "cifar", 3, 10, 4, 32, 32, 0.0),
    ("cifar-1ch-1000cls-28x28", "cifar", 1, 1000, 2, 28, 28, 0.1),
]
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
SGD = dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)

# Float64 against float64: only the order of summation differs.
DOUBLE_TOLERANCE = 1e-9
# Float32 against the float64 truth: PyTorch's own float32 error times this factor, and never
# stricter than FLOAT_FLOOR (a few float32 ulps of accumulated rounding).
FLOAT_FACTOR = 8.0
FLOAT_FLOOR = 1e-5


def build_model(stem, in_channels, classes):
    model = torchvision.models.resnet18(num_classes=classes)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    # Non-trivial BatchNorm parameters and buffers, so that every term of the maths shows.
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            c = module.num_features
            module.weight.data = torch.rand(c, generator=generator) + 0.5
            module.bias.data = torch.randn(c, generator=generator) * 0.1
            module.running_mean = torch.randn(c, generator=generator) * 0.1
            module.running_var = torch.rand(c, generator=generator) + 0.5
            module.num_batches_tracked.fill_(3)
    return model


def training_step(weights, stem, in_channels, classes, images, labels, smoothing, dtype):
    """One training step of a fresh torchvision model holding `weights`, in `dtype`: returns
    everything the tool must reproduce, keyed as the tool writes it."""
    model = build_model(stem, in_channels, classes)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    model = model.to(dtype).train()
    x = torch.from_numpy(images).to(dtype)
    y = torch.from_numpy(labels).long()
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y, label_smoothing=smoothing)
    model.zero_grad()
    loss.backward()
    out = {"logits": logits.detach().numpy(), "loss": np.array(loss.item())}
    names = [name for name, _ in model.named_parameters()]
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.numpy().copy()
    for name, b in model.named_buffers():
        out["buffer." + name] = b.numpy().copy()
    for label, make in (("adamw", lambda ps: torch.optim.AdamW(ps, **ADAMW)),
                        ("sgd", lambda ps: torch.optim.SGD(ps, **SGD))):
        params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
        for p, src in zip(params, model.parameters()):
            p.grad = src.grad.clone()
        make(params).step()
        for name, p in zip(names, params):
            out[label + "." + name] = p.detach().numpy()
    return out


def relative_error(ours, truth):
    """max |ours - truth| / max |truth|: an error relative to the tensor's scale, which stays
    meaningful for tensors with entries near zero."""
    scale = float(np.max(np.abs(truth))) if truth.size else 0.0
    return float(np.max(np.abs(ours.astype(np.float64) - truth))) / max(scale, 1e-30)


def checks(keys):
    """Groups the compared tensors into the checks the test reports."""
    groups = {"logits": [], "loss": [], "gradients": [], "running stats": [],
              "num_batches_tracked": [], "params after AdamW": [], "params after SGD": []}
    for key in keys:
        if key in ("logits", "loss"):
            groups[key].append(key)
        elif key.startswith("grad."):
            groups["gradients"].append(key)
        elif key.endswith("num_batches_tracked"):
            groups["num_batches_tracked"].append(key)
        elif key.startswith("buffer."):
            groups["running stats"].append(key)
        elif key.startswith("adamw."):
            groups["params after AdamW"].append(key)
        elif key.startswith("sgd."):
            groups["params after SGD"].append(key)
    return groups


def worst(group, ours, truth):
    errors = [(relative_error(ours[k], truth[k]), k) for k in group]
    return max(errors) if errors else (0.0, "-")


def run_tool(case_path, out_path, precision):
    result = subprocess.run([TOOL, case_path, out_path, precision], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"parity_step failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return rddp_tensors.read(out_path).tensors


def main():
    if not os.path.exists(TOOL):
        sys.exit(f"missing {TOOL}: build the project first (scripts/test.sh)")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, stem, in_channels, classes, batch, height, width, smoothing in CASES:
            torch.manual_seed(0)
            model = build_model(stem, in_channels, classes)
            rng = np.random.default_rng(0)
            images = rng.standard_normal((batch, in_channels, height, width)).astype(np.float32)
            labels = rng.integers(0, classes, size=batch).astype(np.int64)

            weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
            case = dict(weights)
            case["input"] = images
            case["labels"] = labels
            metadata = {"stem": stem, "in_channels": str(in_channels), "num_classes": str(classes),
                        "label_smoothing": repr(smoothing),
                        "adamw.lr": repr(ADAMW["lr"]), "adamw.beta1": repr(ADAMW["betas"][0]),
                        "adamw.beta2": repr(ADAMW["betas"][1]), "adamw.eps": repr(ADAMW["eps"]),
                        "adamw.weight_decay": repr(ADAMW["weight_decay"]),
                        "sgd.lr": repr(SGD["lr"]), "sgd.momentum": repr(SGD["momentum"]),
                        "sgd.nesterov": "1" if SGD["nesterov"] else "0",
                        "sgd.weight_decay": repr(SGD["weight_decay"])}
            case_path = os.path.join(tmp, name + ".case")
            rddp_tensors.write(case_path, case, metadata)

            step = (weights, stem, in_channels, classes, images, labels, smoothing)
            truth = training_step(*step, torch.float64)
            # PyTorch's own float32 run, to scale what float32 can be expected to reach.
            torch_f32 = training_step(*step, torch.float32)

            ours64 = run_tool(case_path, os.path.join(tmp, name + ".f64"), "double")
            ours32 = run_tool(case_path, os.path.join(tmp, name + ".f32"), "float")
            missing = sorted(set(truth) - set(ours64))
            if missing:
                failures.append(f"{name}: the tool wrote no {missing[:3]}...")
                continue

            print(f"\n{name}: batch {batch}, loss {float(truth['loss']):.6f}")
            print(f"  {'check':22} {'ours f64':>10} {'ours f32':>10} {'torch f32':>10}  worst tensor (f32)")
            for check, keys in checks(truth.keys()).items():
                e64, _ = worst(keys, ours64, truth)
                e32, key32 = worst(keys, ours32, truth)
                t32, _ = worst(keys, torch_f32, truth)
                bound = max(FLOAT_FACTOR * t32, FLOAT_FLOOR)
                print(f"  {check:22} {e64:10.2e} {e32:10.2e} {t32:10.2e}  {key32}")
                if e64 > DOUBLE_TOLERANCE:
                    failures.append(f"{name} {check}: float64 error {e64:.2e} > {DOUBLE_TOLERANCE}")
                if e32 > bound:
                    failures.append(f"{name} {check}: float32 error {e32:.2e} > {bound:.2e} "
                                    f"({FLOAT_FACTOR} x PyTorch float32's {t32:.2e})")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"\nall {len(CASES)} cases agree with PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
