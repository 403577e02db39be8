"""`resnet_ddp --init WEIGHTS --eval` on an ImageNet-layout folder of JPEGs against torchvision's
own evaluation of the same model: the validation loss, top-1 and top-5 accuracy.

The torchvision side is what a PyTorch user runs: ImageFolder's loader (Image.open(path)
.convert("RGB")), Resize(256), CenterCrop(224), ToTensor, Normalize with ImageNet's mean and
standard deviation, resnet18 in eval mode. Its state_dict goes through the conversion of
scripts/torchvision_to_resnet_ddp.py (test_converters runs that script as a program). So one
run joins the converter, the JPEG decoder, the resize and crop, the normalisation, the ImageNet
stem with running statistics, the loss and the ranking of the logits, which other tests check
one at a time.

The model has random weights and running statistics gathered from the images themselves, so that
eval mode normalises as a trained model's would. So that top-1 and top-5 say something, each
image is filed under the class at rank 0, 1, 4 or 5 of torchvision's logits for it, passing over
a rank whose logit is within rounding of another (where either order would be right).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image

import torchvision_to_resnet_ddp
from image_export import make_image

SOURCE_DIR = os.environ.get("RDDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("RDDP_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))

CLASSES = 10
IMAGES = 16
RANKS = (0, 1, 4, 5)  # where the label sits among the logits: top-1, top-5 only, on the edge
# Float32 forward passes that add in different orders differ by far less than 1e-5 of the
# logits' scale (the mean loss here agreed to 3e-8); a label logit clear of every other by 1e-3
# of it keeps its rank in both.
CLEAR = 1e-3
LOSS_REL = 1e-5

TRANSFORM = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                       T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])


def inputs(paths):
    return torch.stack([TRANSFORM(Image.open(path).convert("RGB")) for path in paths])


def torchvision_logits(model, paths):
    with torch.no_grad():
        return model(inputs(paths))


def clear_rank(logits, label):
    """The label's rank, or None when its logit is within CLEAR of another one."""
    gaps = np.abs(np.delete(logits, label) - logits[label])
    if gaps.min() <= CLEAR * np.abs(logits).max():
        return None
    return int((logits > logits[label]).sum())


def main():
    program = os.path.join(BUILD_DIR, "resnet_ddp")
    if not os.access(program, os.X_OK):
        sys.exit(f"FAILED: {program} is missing: build resnet_ddp first")
    torch.manual_seed(5)
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as work:
        def new_image(name):
            # Sizes around 256 in both orientations, so that Resize scales up and down.
            width, height = (int(rng.integers(200, 400)), int(rng.integers(200, 400)))
            path = os.path.join(work, f"{name}.jpg")
            make_image(rng, height, width, "RGB").save(path, quality=90)
            return path

        staged = [new_image(f"image{i:02d}") for i in range(IMAGES)]

        model = torchvision.models.resnet18(num_classes=CLASSES)
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.momentum = None  # a cumulative mean over the batches seen
        model.train()
        with torch.no_grad():
            model(inputs(staged))
        model.eval()
        logits = torchvision_logits(model, staged).numpy()

        # File each image under the class at its wanted rank, or the next rank that is clear.
        data = os.path.join(work, "data")
        labels = {}
        for i, path in enumerate(staged):
            order = np.argsort(-logits[i], kind="stable")
            for rank in RANKS[i % len(RANKS):] + RANKS[:i % len(RANKS)]:
                if clear_rank(logits[i], order[rank]) == rank:
                    labels[path] = int(order[rank])
                    break
        # Every class folder must hold an image, in train/ (which names the classes) and val/:
        # a class no image was filed under gets a new one, at whatever clear rank it has there.
        for label in sorted(set(range(CLASSES)) - set(labels.values())):
            for attempt in range(20):
                path = new_image(f"class{label}-{attempt}")
                if clear_rank(torchvision_logits(model, [path])[0].numpy(), label) is not None:
                    labels[path] = label
                    break
            else:
                sys.exit(f"FAILED: 20 new images all had class {label}'s logit tied with another")
        for path, label in labels.items():
            folder = os.path.join(data, "val", f"class{label}")
            os.makedirs(folder, exist_ok=True)
            shutil.copy(path, folder)
        for label in range(CLASSES):
            folder = os.path.join(data, "train", f"class{label}")
            os.makedirs(folder)
            shutil.copy(staged[0], folder)

        # The reference: torchvision over the files as they now lie, label by folder.
        val_paths = sorted(labels)
        val_logits = torchvision_logits(model, val_paths)
        targets = torch.tensor([labels[path] for path in val_paths])
        want_loss = torch.nn.functional.cross_entropy(val_logits, targets).item()
        want_top1 = int((val_logits.argmax(1) == targets).sum())
        want_top5 = int((val_logits.topk(5, dim=1).indices == targets[:, None]).any(dim=1).sum())
        count = len(val_paths)
        ranks = [clear_rank(val_logits[k].numpy(), int(targets[k])) for k in range(count)]
        print(f"{count} images, label ranks {sorted(ranks)}: torchvision loss {want_loss:.6f}, "
              f"top-1 {want_top1}, top-5 {want_top5}")
        if not 0 < want_top1 < want_top5 < count:
            sys.exit("FAILED: the images do not separate top-1, top-5 and the rest; "
                     "change the seed")

        pth, weights = os.path.join(work, "model.pth"), os.path.join(work, "model.rddp")
        torch.save(model.state_dict(), pth)
        torchvision_to_resnet_ddp.convert(pth, weights, "auto")
        log = os.path.join(work, "eval.jsonl")
        run = subprocess.run([program, "--data", data, "--init", weights, "--eval",
                              "--device", "cpu", "--batch-size", "8", "--log-json", log],
                             capture_output=True, text=True,
                             env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        if run.returncode != 0:
            sys.exit(f"FAILED: resnet_ddp --eval exited {run.returncode}:\n"
                     f"{run.stdout}{run.stderr}")
        print(run.stdout.strip().splitlines()[-1])
        with open(log) as f:
            record = [json.loads(line) for line in f if line.strip()][-1]

    got_top1 = round(record["val_accuracy"] * count)
    got_top5 = round(record["val_top5_accuracy"] * count)
    error = abs(record["val_loss"] - want_loss) / abs(want_loss)
    print(f"resnet_ddp: loss {record['val_loss']:.6f} (relative error {error:.1e}), "
          f"top-1 {got_top1}, top-5 {got_top5}")
    failures = []
    if error > LOSS_REL:
        failures.append(f"loss {record['val_loss']!r} against {want_loss!r}: relative error "
                        f"{error:.1e} > {LOSS_REL:.0e}")
    if (got_top1, got_top5) != (want_top1, want_top5):
        failures.append(f"top-1/top-5 {got_top1}/{got_top5} of {count}, torchvision "
                        f"{want_top1}/{want_top5}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
