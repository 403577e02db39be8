"""Our CPU optimizers (and the CPU twin of the fused softmax cross-entropy) against PyTorch:
torch.optim.AdamW and torch.optim.SGD (foreach=False) over several steps with a learning rate
that changes between them (also with some values in a param group of weight_decay 0, as
--no-decay-norm-bias keeps BatchNorm and biases out of weight decay), and
nn.functional.cross_entropy with and without label smoothing,
all on random float32 tensors. Our side is the program cpu_twin_outputs
(tests/parity/tools/cpu_twin_outputs.cpp), found under RDDP_BUILD_DIR."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOOL = "cpu_twin_outputs"
FLT_EPSILON = float(np.finfo(np.float32).eps)


def find_tool():
    for root, _, files in os.walk(os.environ["RDDP_BUILD_DIR"]):
        if TOOL in files and os.access(os.path.join(root, TOOL), os.X_OK):
            return os.path.join(root, TOOL)
    return None


def run_tool(tool, what, inputs, settings, workdir):
    source, target = os.path.join(workdir, "in.bin"), os.path.join(workdir, "out.bin")
    with open(source, "wb") as f:
        for array in inputs:
            array.tofile(f)
    args = [tool, what, source, target] + [f"{key}={value}" for key, value in settings.items()]
    subprocess.run(args, check=True)
    return target


def mismatches(ours, theirs, rtol, atol):
    """Indices where |ours - theirs| > atol + rtol * |theirs|."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    bad = ~(np.abs(ours - theirs) <= atol + rtol * np.abs(theirs))
    return np.flatnonzero(bad)


def report(name, what, ours, theirs, rtol, atol):
    bad = mismatches(ours, theirs, rtol, atol)
    worst = np.max(np.abs(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64)))
    line = f"  {name}: {what}: max |ours - torch| = {worst:.3g}"
    if bad.size:
        first = bad[0]
        line += (f", {bad.size} outside tolerance, first at {first}:"
                 f" ours {ours[first]!r}, torch {theirs[first]!r}")
    print(line)
    return bad.size == 0


# Both sides evaluate the same float32 expressions; they may differ in fused multiply-adds and
# in the order PyTorch's vectorised kernels apply scalars, a few ulps per operation and ~10
# operations per step. 4 steps stay well inside 1e-5 relative; the absolute part (1e-6 of the
# largest value of the buffer) covers values that cancel to far below the size of their terms.
def close_buffers(name, what, ours, theirs):
    atol = 1e-6 * float(np.max(np.abs(theirs))) if theirs.size else 0.0
    return report(name, what, ours, theirs, 1e-5, atol)


CHUNK = 64  # include/resnet_ddp/kernel_math/weight_decay.h: the mask's granularity


def check_optimizer(tool, workdir, rng, name, kind, lrs, no_decay_chunks=(), **options):
    """Both optimizers over the same 1000 values. With no_decay_chunks, PyTorch's side holds the
    values as tensors of CHUNK elements in two param groups, the listed chunks in one of
    weight_decay 0, as recipes keep BatchNorm and biases out of weight decay; ours takes the
    same chunks as its mask."""
    elements = 1000
    params = rng.standard_normal(elements).astype(np.float32)
    grads = [(0.1 * rng.standard_normal(elements)).astype(np.float32) for _ in lrs]

    pieces = [torch.nn.Parameter(torch.from_numpy(params[at:at + CHUNK].copy()))
              for at in range(0, elements, CHUNK)]
    weight_decay = options.get("weight_decay", 1e-2 if kind == "adamw" else 0.0)
    groups = [{"params": [p for i, p in enumerate(pieces) if i not in no_decay_chunks]}]
    if no_decay_chunks:
        groups.append({"params": [pieces[i] for i in no_decay_chunks], "weight_decay": 0.0})
    if kind == "adamw":
        betas = (options.get("beta1", 0.9), options.get("beta2", 0.999))
        optimizer = torch.optim.AdamW(groups, lr=lrs[0], foreach=False, betas=betas,
                                      eps=options.get("eps", 1e-8), weight_decay=weight_decay)
    else:
        optimizer = torch.optim.SGD(groups, lr=lrs[0], foreach=False,
                                    momentum=options.get("momentum", 0.0),
                                    nesterov=bool(options.get("nesterov", 0)),
                                    weight_decay=weight_decay)
    for lr, grad in zip(lrs, grads):
        for group in optimizer.param_groups:
            group["lr"] = lr
        for index, piece in enumerate(pieces):
            piece.grad = torch.from_numpy(grad[index * CHUNK:(index + 1) * CHUNK].copy())
        optimizer.step()

    def joined(key):
        return torch.cat([optimizer.state[p][key] for p in pieces])

    param = torch.cat([p.detach() for p in pieces])
    moments = ([joined("exp_avg"), joined("exp_avg_sq")] if kind == "adamw"
               else [joined("momentum_buffer")] if options.get("momentum", 0.0) != 0 else [])

    settings = {"elements": elements, "lrs": ",".join(repr(lr) for lr in lrs)}
    settings.update(options)
    if no_decay_chunks:
        settings["no_decay_chunks"] = ",".join(str(i) for i in no_decay_chunks)
    if kind == "sgd":
        settings.setdefault("weight_decay", 0.0)
    output = np.fromfile(run_tool(tool, kind, [params] + grads, settings, workdir), np.float32)
    if output.size != elements * (1 + len(moments)):
        expected = elements * (1 + len(moments))
        print(f"  {name}: {TOOL} wrote {output.size} values, expected {expected}")
        return False
    ok = close_buffers(name, "params", output[:elements], param.numpy())
    for index, moment in enumerate(moments):
        ours = output[(index + 1) * elements:(index + 2) * elements]
        ok &= close_buffers(name, f"moment {index + 1}", ours, moment.numpy())
    return ok


def check_xent(tool, workdir, rng, batch, classes, smoothing):
    name = f"cross_entropy {batch}x{classes} smoothing {smoothing}"
    logits = (4.0 * rng.standard_normal((batch, classes))).astype(np.float32)
    labels = rng.integers(0, classes, batch).astype(np.int32)
    labels[::2] = logits[::2].argmax(axis=1)  # so that 'correct' counts more than chance
    # and every third label the fifth or sixth largest logit's, where top-5 decides
    order = np.argsort(-logits, axis=1, kind="stable")
    if classes > 5:
        rows = np.arange(1, batch, 3)
        labels[rows] = order[rows, 4 + np.arange(len(rows)) % 2]
    x = torch.from_numpy(logits.copy()).requires_grad_()
    loss = torch.nn.functional.cross_entropy(x, torch.from_numpy(labels).long(),
                                             label_smoothing=smoothing)
    loss.backward()
    target = torch.from_numpy(labels).long()
    correct = int((x.detach().argmax(dim=1) == target).sum())
    top5 = x.detach().topk(min(5, classes), dim=1).indices
    correct_top5 = int((top5 == target[:, None]).any(dim=1).sum())

    with open(run_tool(tool, "xent", [logits, labels],
                       {"batch": batch, "classes": classes, "smoothing": smoothing}, workdir),
              "rb") as f:
        our_loss = np.fromfile(f, np.float64, 1)[0]
        our_correct, our_top5 = (int(n) for n in np.fromfile(f, np.int64, 2))
        our_dlogits = np.fromfile(f, np.float32)
    # Sums of C float32 exponentials in different orders: up to (C + 64) ulps on every
    # probability, so on (p - target) / N up to the 1/N of the target.
    rel = (classes + 64) * FLT_EPSILON
    ok = our_correct == correct and our_top5 == correct_top5
    print(f"  {name}: correct: ours {our_correct}, torch {correct}; "
          f"top-5: ours {our_top5}, torch {correct_top5}")
    ok &= report(name, "loss", np.array([our_loss]), np.array([loss.item()]), rel, rel)
    ok &= report(name, "dlogits", our_dlogits, x.grad.numpy().ravel(), rel, rel / batch)
    return ok


def main():
    tool = find_tool()
    if tool is None:
        print(f"SKIPPED: test_optimizer_parity: {TOOL} is not built under "
              f"{os.environ['RDDP_BUILD_DIR']}: build its target, from "
              f"tests/parity/tools/{TOOL}.cpp")
        return 77
    rng = np.random.default_rng(20240611)
    lrs = [1e-2, 3e-2, 0.0, 5e-3]
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for wd in (0.0, 1e-2, 0.3):
            ok &= check_optimizer(tool, workdir, rng, f"AdamW wd {wd}", "adamw", lrs,
                                  weight_decay=wd)
        ok &= check_optimizer(tool, workdir, rng, "AdamW betas 0.8/0.99 eps 1e-6", "adamw", lrs,
                              weight_decay=1e-2, beta1=0.8, beta2=0.99, eps=1e-6)
        for momentum, nesterov, wd in ((0.0, 0, 0.0), (0.0, 0, 1e-2), (0.9, 0, 5e-4),
                                       (0.9, 1, 0.0), (0.5, 1, 1e-2)):
            ok &= check_optimizer(tool, workdir, rng,
                                  f"SGD momentum {momentum} nesterov {nesterov} wd {wd}", "sgd",
                                  lrs, momentum=momentum, nesterov=nesterov, weight_decay=wd)
        # --no-decay-norm-bias: some chunks (the last one partial) in a group of weight decay 0.
        no_decay = (0, 3, 4, 15)
        ok &= check_optimizer(tool, workdir, rng, f"AdamW wd 0.3, chunks {no_decay} without",
                              "adamw", lrs, no_decay_chunks=no_decay, weight_decay=0.3)
        ok &= check_optimizer(tool, workdir, rng, f"SGD momentum 0.9 wd 0.1, chunks {no_decay} "
                              "without", "sgd", lrs, no_decay_chunks=no_decay, momentum=0.9,
                              weight_decay=0.1)
        for batch, classes in ((1, 2), (64, 10), (33, 1000), (8, 1001)):
            for smoothing in (0.0, 0.1):
                ok &= check_xent(tool, workdir, rng, batch, classes, smoothing)
    print("parity with torch.optim and cross_entropy:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
