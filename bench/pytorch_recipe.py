#!/usr/bin/env python3
"""Trains torchvision's resnet18 on Fashion-MNIST with resnet_ddp's default recipe, in PyTorch,
so that the two can be compared on the same machine in the same run:

  cifar stem (3x3/1 conv, no max pooling), 1 input channel, 10 classes; AdamW (lr 1e-3,
  weight decay 1e-2); batch 128; RandomCrop(28, padding=4) + RandomHorizontalFlip;
  Normalize(0.2860, 0.3530); DistributedSampler-style shuffling with seed + epoch; validation
  on the 10000 test images after every epoch.

    python3 bench/pytorch_recipe.py --epochs 5 [--device cuda] [--limit-train N]

Prints one line per epoch and, last, `final validation accuracy X%`. Reads the idx files of
Debian's dataset-fashion-mnist (or --data DIR) directly, so it needs no download.
"""
import argparse
import gzip
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


def normalise(images, device):
    return ((images.to(device).float() / 255.0 - MEAN) / STD).unsqueeze(1)


def build_model():
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    return model


def evaluate(model, images, labels, device, batch):
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for start in range(0, len(images), batch):
            x = normalise(images[start:start + batch], device)
            y = labels[start:start + batch].to(device)
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
    model.train()
    return loss_sum / len(images), correct / len(images)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=["tf32", "fp32"], default="tf32")
    parser.add_argument("--limit-train", type=int, default=0)
    parser.add_argument("--limit-val", type=int, default=0)
    args = parser.parse_args()

    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    train_x = torch.from_numpy(read_idx(find(args.data, "train-images-idx3-ubyte")).copy())
    train_y = torch.from_numpy(read_idx(find(args.data, "train-labels-idx1-ubyte")).astype(np.int64))
    val_x = torch.from_numpy(read_idx(find(args.data, "t10k-images-idx3-ubyte")).copy())
    val_y = torch.from_numpy(read_idx(find(args.data, "t10k-labels-idx1-ubyte")).astype(np.int64))
    if args.limit_train:
        train_x, train_y = train_x[:args.limit_train], train_y[:args.limit_train]
    if args.limit_val:
        val_x, val_y = val_x[:args.limit_val], val_y[:args.limit_val]

    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    augment_generator = torch.Generator().manual_seed(args.seed)
    accuracy = 0.0
    for epoch in range(args.epochs):
        start = time.time()
        # DistributedSampler with one replica: randperm seeded by seed + epoch.
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(args.seed + epoch))
        seen, correct, loss_sum = 0, 0, 0.0
        for first in range(0, len(order), args.batch_size):
            index = order[first:first + args.batch_size]
            x = normalise(augment(train_x[index], augment_generator), device)
            y = train_y[index].to(device)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(index)
            loss_sum += loss.item() * len(index)
            correct += (logits.argmax(1) == y).sum().item()
        val_loss, accuracy = evaluate(model, val_x, val_y, device, 512)
        elapsed = time.time() - start
        print(f"epoch {epoch + 1}/{args.epochs}: train loss {loss_sum / seen:.4f} acc {100 * correct / seen:.2f}% "
              f"| val loss {val_loss:.4f} acc {100 * accuracy:.2f}% | {elapsed:.1f} s, {seen / elapsed:.0f} img/s",
              flush=True)
    print(f"final validation accuracy {100 * accuracy:.2f}%")


if __name__ == "__main__":
    main()
