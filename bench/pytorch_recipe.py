#!/usr/bin/env python3
"""Trains torchvision's resnet18 on Fashion-MNIST with resnet_ddp's default recipe, in PyTorch,
so that the two can be compared on the same machine in the same run:

  cifar stem (3x3/1 conv, no max pooling), 1 input channel, 10 classes; AdamW (lr 1e-3,
  weight decay 1e-2); batch 128; RandomCrop(28, padding=4) + RandomHorizontalFlip;
  Normalize(0.2860, 0.3530); DistributedSampler-style shuffling with seed + epoch; validation
  on the 10000 test images after every epoch. --lr-schedule and --warmup-epochs give the
  learning rate of every step exactly as resnet_ddp's flags of the same names do, and
  --no-decay-norm-bias keeps the same parameters out of weight decay.

    python3 bench/pytorch_recipe.py --epochs 5 [--device cuda] [--lr-schedule cosine]
        [--warmup-epochs E] [--no-decay-norm-bias] [--limit-train N] [--log-json FILE]

Prints one line per epoch and, last, `final validation accuracy X% (top-5 Y%)`. --log-json
appends one JSON object per step and per epoch with resnet_ddp's --log-json keys and number
format, so that the same tools read both. Reads the idx files of Debian's dataset-fashion-mnist (or
--data DIR) directly, so it needs no download.
"""
import argparse
import gzip
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as stream:
        data = stream.read()
    magic, count = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, count * rows * cols, 16).reshape(count, rows, cols)
    if magic == 0x801:
        return np.frombuffer(data, np.uint8, count, 8)
    sys.exit(f"{path}: not an idx file (magic {magic:#x})")


def find(directory, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    sys.exit(f"{directory}: no {stem}[.gz]; install dataset-fashion-mnist or pass --data")


def augment(images, generator):
    """RandomCrop(28, padding=4) + RandomHorizontalFlip(0.5) on a uint8 batch [N, 28, 28]."""
    n = images.shape[0]
    padded = F.pad(images, (4, 4, 4, 4))
    tops = torch.randint(0, 9, (n,), generator=generator)
    lefts = torch.randint(0, 9, (n,), generator=generator)
    flips = torch.rand(n, generator=generator) < 0.5
    out = torch.empty_like(images)
    for i in range(n):
        crop = padded[i, tops[i]:tops[i] + 28, lefts[i]:lefts[i] + 28]
        out[i] = crop.flip(-1) if flips[i] else crop
    return out


def load_split(directory, split, limit=0):
    """The images (uint8 [N, 28, 28]) and labels (int64) of split "train" or "t10k", the first
    `limit` of them when limit > 0."""
    images = torch.from_numpy(read_idx(find(directory, f"{split}-images-idx3-ubyte")).copy())
    labels = torch.from_numpy(read_idx(find(directory, f"{split}-labels-idx1-ubyte")).astype(np.int64))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    return images, labels


def normalise(images, device):
    return ((images.to(device).float() / 255.0 - MEAN) / STD).unsqueeze(1)


def round_half_away(x):
    """std::llround, which resnet_ddp rounds the warm-up's length with; Python's round() rounds
    halves to even and would make 2.5 warm-up steps 2 where resnet_ddp makes them 3."""
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


class LrSchedule:
    """resnet_ddp's LrScheduleFn (src/train/lr_schedule.cpp), operation for operation, so that
    both sides train with the same double at every step: torch.optim.lr_scheduler's
    CosineAnnealingLR updates the rate recursively and rounds differently."""

    def __init__(self, kind, base_lr, epochs, steps_per_epoch, warmup_epochs):
        self.kind, self.base_lr = kind, base_lr
        steps_per_epoch = max(steps_per_epoch, 1)
        self.total_steps = epochs * steps_per_epoch
        self.warmup_steps = min(round_half_away(warmup_epochs * steps_per_epoch), self.total_steps)

    def at(self, step):
        """The rate of global step `step`, 0-based over all epochs."""
        if step < self.warmup_steps:
            return self.base_lr * float(step + 1) / self.warmup_steps
        if self.kind == "constant":
            return self.base_lr
        span = max(self.total_steps - self.warmup_steps, 1)
        progress = min(1.0, float(step - self.warmup_steps) / span)
        return self.base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def backward_and_step(optimizer, loss, lr):
    """The gradients of `loss`, then one optimizer step at learning rate `lr`."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()


def parameter_groups(model, decay_norm_and_bias=True):
    """The optimizer's param groups: one, or, as resnet_ddp's --no-decay-norm-bias, a second of
    weight_decay 0 holding every one-dimensional parameter (BatchNorm weights and biases, and
    fc.bias), the usual recipe's `p.ndim <= 1` rule."""
    if decay_norm_and_bias:
        return [{"params": list(model.parameters())}]
    decayed = [p for p in model.parameters() if p.ndim > 1]
    undecayed = [p for p in model.parameters() if p.ndim <= 1]
    return [{"params": decayed}, {"params": undecayed, "weight_decay": 0.0}]


def json_record(**fields):
    """One line as resnet_ddp's --log-json writes it: no spaces, numbers as printf's %.9g."""
    parts = []
    for key, value in fields.items():
        text = f'"{value}"' if isinstance(value, str) else format(value, ".9g")
        parts.append(f'"{key}":{text}')
    return "{" + ",".join(parts) + "}"


def build_model(stem="cifar"):
    """torchvision's resnet18 for one input channel and 10 classes, with resnet_ddp's cifar stem
    (3x3/1 convolution, no max pooling) or torchvision's own imagenet stem (7x7/2, max pooling)."""
    model = torchvision.models.resnet18(num_classes=10)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    else:
        model.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model


def evaluate(model, images, labels, device, batch):
    model.eval()
    correct, correct_top5, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for start in range(0, len(images), batch):
            x = normalise(images[start:start + batch], device)
            y = labels[start:start + batch].to(device)
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
            correct_top5 += (logits.topk(5, dim=1).indices == y[:, None]).any(dim=1).sum().item()
    model.train()
    return loss_sum / len(images), correct / len(images), correct_top5 / len(images)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant",
                        help="as resnet_ddp's: cosine decays to 0 at the last step")
    parser.add_argument("--warmup-epochs", type=float, default=0.0,
                        help="as resnet_ddp's: linear warm-up over E epochs (fractions allowed)")
    parser.add_argument("--no-decay-norm-bias", action="store_true",
                        help="as resnet_ddp's: no weight decay on one-dimensional parameters")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=["tf32", "fp32"], default="tf32")
    parser.add_argument("--limit-train", type=int, default=0)
    parser.add_argument("--limit-val", type=int, default=0)
    parser.add_argument("--log-json", metavar="FILE",
                        help="append one JSON object per step and per epoch, as resnet_ddp's --log-json")
    args = parser.parse_args()
    if not 0 <= args.warmup_epochs <= args.epochs:
        parser.error(f"--warmup-epochs {args.warmup_epochs} must lie between 0 and --epochs {args.epochs}")

    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    train_x, train_y = load_split(args.data, "train", args.limit_train)
    val_x, val_y = load_split(args.data, "t10k", args.limit_val)

    model = build_model().to(device)
    optimizer = torch.optim.AdamW(parameter_groups(model, not args.no_decay_norm_bias), lr=args.lr,
                                  weight_decay=args.weight_decay)
    augment_generator = torch.Generator().manual_seed(args.seed)
    # No drop_last, as resnet_ddp: the last batch of an epoch may be smaller.
    steps_per_epoch = (len(train_x) + args.batch_size - 1) // args.batch_size
    schedule = LrSchedule(args.lr_schedule, args.lr, args.epochs, steps_per_epoch, args.warmup_epochs)
    log = open(args.log_json, "a") if args.log_json else None
    accuracy, top5, global_step = 0.0, 0.0, 0
    for epoch in range(args.epochs):
        start = time.time()
        # DistributedSampler with one replica: randperm seeded by seed + epoch.
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(args.seed + epoch))
        seen, correct, loss_sum = 0, 0, 0.0
        for first in range(0, len(order), args.batch_size):
            step_start = time.time()
            index = order[first:first + args.batch_size]
            x = normalise(augment(train_x[index], augment_generator), device)
            y = train_y[index].to(device)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            lr = schedule.at(global_step)
            backward_and_step(optimizer, loss, lr)
            global_step += 1
            step_loss, step_correct = loss.item(), (logits.argmax(1) == y).sum().item()
            seen += len(index)
            loss_sum += step_loss * len(index)
            correct += step_correct
            if log:
                log.write(json_record(type="step", epoch=epoch + 1, global_step=global_step, lr=lr,
                                      loss=step_loss, accuracy=step_correct / len(index),
                                      images_per_s=len(index) / (time.time() - step_start)) + "\n")
        val_loss, accuracy, top5 = evaluate(model, val_x, val_y, device, 512)
        elapsed = time.time() - start
        print(f"epoch {epoch + 1}/{args.epochs}: train loss {loss_sum / seen:.4f} acc {100 * correct / seen:.2f}% "
              f"| val loss {val_loss:.4f} acc {100 * accuracy:.2f}% (top-5 {100 * top5:.2f}%) "
              f"| {elapsed:.1f} s, {seen / elapsed:.0f} img/s",
              flush=True)
        if log:
            log.write(json_record(type="epoch", epoch=epoch + 1, global_step=global_step, lr=lr,
                                  train_loss=loss_sum / seen, train_accuracy=correct / seen,
                                  val_loss=val_loss, val_accuracy=accuracy, val_top5_accuracy=top5,
                                  seconds=elapsed,
                                  images_per_s=seen / elapsed) + "\n")
            log.flush()
    if log:
        log.close()
    print(f"final validation accuracy {100 * accuracy:.2f}% (top-5 {100 * top5:.2f}%)")


if __name__ == "__main__":
    main()
