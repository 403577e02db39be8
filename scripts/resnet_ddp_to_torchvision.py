#!/usr/bin/env python3
"""Converts a resnet_ddp weights file (or checkpoint) into a torchvision state_dict (.pth).

The output loads with model.load_state_dict(torch.load(OUTPUT)) into torchvision's resnet18
(resnet34 for blocks 3,4,6,3) built for the file's class count; for the cifar stem or another
input channel count, conv1 (and for cifar the max pooling) must be replaced first. The script
prints the lines that build such a model. Tensors keep their dtype; anything that is not a
model weight (a checkpoint's optimizer state) is left out.
"""

import argparse
import os
import sys

try:
    import numpy as np
    import torch
    import rddp_tensors
except ImportError as missing:
    sys.exit(f"{os.path.basename(sys.argv[0])}: error: {missing}: run it with a Python that has "
             f"torch and numpy, e.g. `$(scripts/find_python.sh torch numpy) {sys.argv[0]} ...`")

TORCHVISION_WIDTHS = (64, 128, 256, 512)
TORCHVISION_BLOCKS = {(2, 2, 2, 2): "resnet18", (3, 4, 6, 3): "resnet34"}


class ConversionError(Exception):
    pass


def to_torch(array, dtype_name):
    if dtype_name == "bf16":  # carried as uint16 bit patterns
        return torch.from_numpy(array.astype(np.int16, copy=False)).view(torch.bfloat16)
    return torch.from_numpy(array)


def model_lines(spec, output_path):
    """Python lines that build the torchvision model this state_dict loads into."""
    name = TORCHVISION_BLOCKS.get(tuple(spec.blocks))
    if name:
        lines = [f"model = torchvision.models.{name}(num_classes={spec.num_classes})"]
    else:
        lines = ["model = torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, "
                 f"{list(spec.blocks)}, num_classes={spec.num_classes})"]
    if spec.stem == "cifar":
        lines.append(f"model.conv1 = nn.Conv2d({spec.in_channels}, {spec.widths[0]}, "
                     "kernel_size=3, stride=1, padding=1, bias=False)")
        lines.append("model.maxpool = nn.Identity()")
    elif spec.in_channels != 3:
        lines.append(f"model.conv1 = nn.Conv2d({spec.in_channels}, {spec.widths[0]}, "
                     "kernel_size=7, stride=2, padding=3, bias=False)")
    lines.append(f"model.load_state_dict(torch.load({output_path!r}))")
    return ["import torch, torch.nn as nn, torchvision"] + lines


def convert(input_path, output_path):
    notes = []
    weights = rddp_tensors.read(input_path)
    source = f"'{input_path}'"
    shapes = {name: array.shape for name, array in weights.tensors.items()}
    spec = rddp_tensors.spec_from_metadata(weights.metadata, source)
    if spec is None:
        spec = rddp_tensors.infer_spec(shapes, source)
        notes.append(f"{source} records no model spec; inferred it from the tensor shapes")
    problems = rddp_tensors.check_against_spec(shapes, spec, ignore_extra=True)
    if problems:
        raise ConversionError(f"{source} does not hold a complete ResNet with "
                              f"{spec.summary()}:\n  " + "\n  ".join(problems))
    expected = rddp_tensors.expected_tensors(spec)
    left_out = [name for name in weights.tensors if name not in expected]
    if left_out:
        notes.append(f"left out {len(left_out)} tensors that are not model weights "
                     f"(e.g. '{left_out[0]}')")
    state_dict = {name: to_torch(weights.tensors[name], weights.dtypes[name]) for name in expected}

    # Crash-safe like every resnet_ddp writer: a temporary beside the target, synced, renamed.
    temporary = f"{output_path}.tmp.{os.getpid()}"
    try:
        with open(temporary, "wb") as stream:
            torch.save(state_dict, stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, output_path)
    except (OSError, RuntimeError) as error:  # torch's writer reports failures as RuntimeError
        if os.path.exists(temporary):
            os.unlink(temporary)
        reason = getattr(error, "strerror", None) or str(error)
        raise ConversionError(f"cannot write '{output_path}': {reason}") from None

    for note in notes:
        print(f"note: {note}")
    print(f"wrote {output_path}: {len(state_dict)} tensors for {spec.summary()}")
    if tuple(spec.widths) != TORCHVISION_WIDTHS:
        print(f"note: torchvision's ResNet has widths {','.join(map(str, TORCHVISION_WIDTHS))}; "
              f"these weights have {','.join(map(str, spec.widths))}, so they load only into a "
              "ResNet built with those widths")
        return
    print("Load it into torchvision with:")
    for line in model_lines(spec, output_path):
        print("    " + line)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", metavar="INPUT", help="resnet_ddp weights or checkpoint file")
    parser.add_argument("output", metavar="OUTPUT.pth", help="torchvision state_dict to write")
    args = parser.parse_args()
    try:
        convert(args.input, args.output)
    except (ConversionError, rddp_tensors.FormatError) as error:
        sys.exit(f"{parser.prog}: error: {error}")


if __name__ == "__main__":
    main()
