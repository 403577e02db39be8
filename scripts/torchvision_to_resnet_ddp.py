#!/usr/bin/env python3
"""Converts a torchvision ResNet-18/34 checkpoint (.pth) into a resnet_ddp weights file.

INPUT may be a state_dict, a whole pickled model (torch.save(model)), or a training checkpoint
holding one under "state_dict", "model" or "model_state_dict"; a "module." prefix (DataParallel,
DistributedDataParallel) is removed. Every parameter and buffer is written, under its
state_dict name, with the model spec inferred from the shapes in the metadata. float16 and
bfloat16 values are widened to float32 (exactly); float32 and float64 are kept as they are.
"""

import argparse
import os
import sys

try:
    import torch
    import rddp_tensors
except ImportError as missing:
    sys.exit(f"{os.path.basename(sys.argv[0])}: error: {missing}: run it with a Python that has "
             f"torch and numpy, e.g. `$(scripts/find_python.sh torch numpy) {sys.argv[0]} ...`")

CHECKPOINT_KEYS = ("state_dict", "model", "model_state_dict")
FLOAT_WIDENED = (torch.float16, torch.bfloat16)


class ConversionError(Exception):
    pass


def load_state_dict(path, notes):
    with open(path, "rb") as stream:
        if stream.read(len(rddp_tensors.MAGIC)) == rddp_tensors.MAGIC:
            raise ConversionError(f"'{path}' is already a resnet_ddp tensor file")
    try:
        loaded = torch.load(path, map_location="cpu")
    except Exception as error:  # torch.load raises many kinds; all mean "not loadable"
        raise ConversionError(
            f"cannot load '{path}' with torch.load: {type(error).__name__}: {error}. It should be "
            "a file written by torch.save (a state_dict or a model); if it is a pickled model "
            "whose class torch cannot import here, save model.state_dict() instead") from None
    if isinstance(loaded, torch.nn.Module):
        notes.append(f"took the state_dict of the pickled {type(loaded).__name__} model")
        loaded = loaded.state_dict()
    if isinstance(loaded, dict) and not any(torch.is_tensor(v) for v in loaded.values()):
        for key in CHECKPOINT_KEYS:
            inner = loaded.get(key)
            if isinstance(inner, torch.nn.Module):
                inner = inner.state_dict()
            if isinstance(inner, dict):
                notes.append(f"took the model weights from the checkpoint's '{key}' entry")
                loaded = inner
                break
    if not isinstance(loaded, dict) or not any(torch.is_tensor(v) for v in loaded.values()):
        keys = list(loaded)[:8] if isinstance(loaded, dict) else []
        raise ConversionError(
            f"'{path}' holds a {type(loaded).__name__}" + (f" with keys {keys}" if keys else "") +
            ", not a state_dict: save model.state_dict(), or a dict with the state_dict under "
            + " or ".join(f"'{key}'" for key in CHECKPOINT_KEYS))
    not_tensors = [name for name, value in loaded.items() if not torch.is_tensor(value)]
    if not_tensors:
        raise ConversionError(f"'{path}': entries {not_tensors[:5]} are not tensors; is it a "
                              "state_dict?")
    if all(name.startswith("module.") for name in loaded):
        notes.append("removed the 'module.' prefix that DataParallel/DistributedDataParallel adds")
        loaded = {name[len("module."):]: value for name, value in loaded.items()}
    return loaded


def to_numpy(name, tensor, kind, notes_widened):
    tensor = tensor.detach().cpu().contiguous()
    if kind == "counter":
        if tensor.dtype != torch.int64:
            raise ConversionError(f"'{name}' is {tensor.dtype}; num_batches_tracked must be int64")
        return tensor.numpy()
    if tensor.dtype in FLOAT_WIDENED:
        notes_widened.append(name)
        return tensor.float().numpy()
    if tensor.dtype not in (torch.float32, torch.float64):
        raise ConversionError(f"'{name}' is {tensor.dtype}; weights must be floating point")
    return tensor.numpy()


def convert(input_path, output_path, stem):
    notes = []
    state_dict = load_state_dict(input_path, notes)
    source = f"'{input_path}'"
    shapes = {name: tuple(value.shape) for name, value in state_dict.items()}
    spec = rddp_tensors.infer_spec(shapes, source)
    if stem != "auto" and stem != spec.stem:
        kernel = shapes["conv1.weight"][2]
        raise ConversionError(
            f"--stem {stem} does not fit {source}: its conv1.weight is {kernel}x{kernel}, which "
            f"is the {spec.stem} stem (7x7 imagenet, 3x3 cifar); leave --stem at auto")
    problems = rddp_tensors.check_against_spec(shapes, spec)
    if problems:
        raise ConversionError(f"{source} does not hold a complete ResNet with "
                              f"{spec.summary()}:\n  " + "\n  ".join(problems))

    expected = rddp_tensors.expected_tensors(spec)
    widened = []
    tensors = {name: to_numpy(name, state_dict[name], kind, widened)
               for name, (_, kind) in expected.items()}
    if widened:
        notes.append(f"widened {len(widened)} half-precision tensors to float32")
    metadata = {"kind": "weights", "converted_from": os.path.basename(input_path)}
    metadata.update(spec.metadata())
    try:
        rddp_tensors.write(output_path, tensors, metadata)
    except OSError as error:
        raise ConversionError(f"cannot write '{output_path}': {error.strerror}") from None

    parameters = [name for name, (_, kind) in expected.items() if kind == "parameter"]
    values = sum(tensors[name].size for name in parameters)
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {output_path}: {len(parameters)} parameter tensors ({values:,} values) and "
          f"{len(tensors) - len(parameters)} BatchNorm buffers for {spec.summary()}")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", metavar="INPUT.pth", help="torch.save file to convert")
    parser.add_argument("output", metavar="OUTPUT", help="resnet_ddp weights file to write")
    parser.add_argument("--stem", choices=("auto", "imagenet", "cifar"), default="auto",
                        help="the stem the weights are for; auto (default) reads it from "
                             "conv1.weight, anything else is checked against it")
    args = parser.parse_args()
    try:
        convert(args.input, args.output, args.stem)
    except (ConversionError, rddp_tensors.FormatError) as error:
        sys.exit(f"{parser.prog}: error: {error}")
    except OSError as error:
        sys.exit(f"{parser.prog}: error: cannot read '{args.input}': {error.strerror}")


if __name__ == "__main__":
    main()
