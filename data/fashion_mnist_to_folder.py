#!/usr/bin/env python3
"""Writes Fashion-MNIST (idx files, plain or gzip) as an image folder of greyscale PNGs:

    OUT/train/<k>-<class name>/<index>.png    OUT/val/<k>-<class name>/<index>.png

Class folders start with their label, so that sorting their names (as torchvision's
ImageFolder and resnet_ddp do) keeps Fashion-MNIST's label numbers; <index> is the image's
position in the idx file, zero-padded, so each class keeps the file's order.
Only the Python standard library is needed.

    data/fashion_mnist_to_folder.py --out /data/fashion-folder
    data/fashion_mnist_to_folder.py --out /tmp/small --train-per-class 60 --val-per-class 10

A subset takes the first N images of each class in file order, so no class folder is empty
(ImageFolder refuses empty ones).
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

CLASS_NAMES = ["t-shirt-top", "trouser", "pullover", "dress", "coat", "sandal", "shirt",
               "sneaker", "bag", "ankle-boot"]
DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(source, name, magic):
    for candidate in (name + ".gz", name):
        path = os.path.join(source, candidate)
        if os.path.exists(path):
            opener = gzip.open if candidate.endswith(".gz") else open
            with opener(path, "rb") as f:
                data = f.read()
            break
    else:
        sys.exit(f"{os.path.join(source, name)}[.gz] not found: install Debian's "
                 f"dataset-fashion-mnist (scripts/setup.sh does) or pass --source")
    found, = struct.unpack(">I", data[:4])
    if found != magic:
        sys.exit(f"{path}: magic number {found:#010x}, expected {magic:#010x}")
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return dims, data[4 + 4 * rank:]


def png_bytes(width, height, pixels):
    """An 8-bit greyscale PNG: each row prefixed by filter type 0, the whole deflated."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9))
            + chunk(b"IEND", b""))


def write_split(source, prefix, out_dir, per_class):
    (n, height, width), images = read_idx(source, f"{prefix}-images-idx3-ubyte", 0x803)
    (n_labels,), labels = read_idx(source, f"{prefix}-labels-idx1-ubyte", 0x801)
    if n != n_labels:
        sys.exit(f"{prefix}: {n} images but {n_labels} labels")
    for name in (f"{k}-{c}" for k, c in enumerate(CLASS_NAMES)):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    size = height * width
    digits = len(str(n - 1))
    written = [0] * len(CLASS_NAMES)
    for i in range(n):
        label = labels[i]
        if per_class is not None and written[label] >= per_class:
            continue
        written[label] += 1
        path = os.path.join(out_dir, f"{label}-{CLASS_NAMES[label]}", f"{i:0{digits}d}.png")
        with open(path, "wb") as f:
            f.write(png_bytes(width, height, images[i * size:(i + 1) * size]))
    return sum(written)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEBIAN_DIR, help=f"idx files (default {DEBIAN_DIR})")
    parser.add_argument("--out", required=True, help="folder to write train/ and val/ into")
    parser.add_argument("--train-per-class", type=int, metavar="N",
                        help="only the first N training images of each class")
    parser.add_argument("--val-per-class", type=int, metavar="N",
                        help="only the first N test images of each class")
    args = parser.parse_args()
    for option in ("train_per_class", "val_per_class"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1")
    train = write_split(args.source, "train", os.path.join(args.out, "train"), args.train_per_class)
    val = write_split(args.source, "t10k", os.path.join(args.out, "val"), args.val_per_class)
    print(f"wrote {train} training and {val} validation PNGs under {args.out}")


if __name__ == "__main__":
    main()
