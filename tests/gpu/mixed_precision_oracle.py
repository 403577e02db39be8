#!/usr/bin/env python3
"""How far PyTorch's own autocast (bf16, fp16) gradients of ResNet-18 lie from float64, measured
the way tests/gpu/test_cuda_bf16.cpp and test_cuda_fp16.cpp measure ours: per tensor, the
relative L2 error and the worst element error as a share of (the tensor's largest |value| + the
element's own |value|), both in units of the format's unit roundoff u (bf16 2^-9, fp16 2^-11).
The same set-up as those tests: batch 4, 10 classes, label smoothing 0.1, torchvision's start
with the BatchNorm affine parameters moved by 0.3 N(0, 1), the cifar stem on 32x32 and the
imagenet stem on 64x64, training mode. Their tolerances are set from what this prints.

    python3 tests/gpu/mixed_precision_oracle.py [--seeds 8]      (needs a CUDA GPU)
"""
import argparse
import math

import torch
import torch.nn as nn
import torchvision


def make_model(stem, seed):
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(num_classes=10)
    if stem == "cifar":
        model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and name != "fc.bias":
                p.add_(0.3 * torch.randn_like(p))
    return model


def gradients(model, images, labels, dtype, device, loss_scale):
    model = model.to(device).train()
    model.zero_grad(set_to_none=True)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    if dtype is None:
        loss = criterion(model(images.to(device)), labels.to(device))
    else:
        with torch.autocast("cuda", dtype=dtype):
            logits = model(images.to(device))
        loss = criterion(logits.float(), labels.to(device))
    (loss * loss_scale).backward()
    return {n: (p.grad.double() / loss_scale).cpu() for n, p in model.named_parameters()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA GPU")
        return
    device = "cuda"
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    cases = [("bf16", torch.bfloat16, 2.0 ** -9, 1.0), ("fp16", torch.float16, 2.0 ** -11, 1024.0),
             ("fp32", None, 2.0 ** -24, 1.0)]
    print("| precision | stem | seeds | worst relative L2 (u) | in | median over tensors of the "
          "worst seed (u) | worst element error (u of max+|v|) | in |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | --- |")
    for label, dtype, unit, scale in cases:
        for stem, size in (("cifar", 32), ("imagenet", 64)):
            worst_rel, worst_rel_name, worst_el, worst_el_name, median_rel = 0.0, "", 0.0, "", 0.0
            for seed in range(args.seeds):
                model = make_model(stem, seed)
                g = torch.Generator().manual_seed(1000 + seed)
                images = torch.randn(4, 3, size, size, generator=g)
                labels = torch.randint(0, 10, (4,), generator=g)
                want = gradients(make_model(stem, seed).double(), images.double(), labels, None,
                                 device, 1.0)
                got = gradients(model, images, labels, dtype, device, scale)
                rels = []
                for name, w in want.items():
                    d = (got[name] - w)
                    norm = w.norm().item()
                    rel = d.norm().item() / norm if norm > 0 else d.norm().item()
                    room = w.abs().max() + w.abs()
                    element = (d.abs() / room.clamp_min(1e-300)).max().item()
                    rels.append(rel)
                    if rel > worst_rel:
                        worst_rel, worst_rel_name = rel, name
                        median_rel = sorted(rels)[len(rels) // 2]
                    if element > worst_el:
                        worst_el, worst_el_name = element, name
                median_rel = max(median_rel, sorted(rels)[len(rels) // 2])
            print(f"| {label} | {stem} | {args.seeds} | {worst_rel / unit:.1f} | {worst_rel_name} | "
                  f"{median_rel / unit:.1f} | {worst_el / unit:.1f} | {worst_el_name} |", flush=True)


if __name__ == "__main__":
    main()
