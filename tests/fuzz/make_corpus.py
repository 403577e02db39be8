#!/usr/bin/env python3
"""Writes the seed corpora of the cifar, cifar_pickle, idx, image, tiny_imagenet, options and
pack harnesses from real files: a photograph (matplotlib's sample grace_hopper.jpg, Debian's
python3-matplotlib), Fashion-MNIST (Debian's dataset-fashion-mnist) and command lines from the
README and the job scripts. make_tensor_seeds writes the tensor_file seeds. Each seed is small,
since libFuzzer mutates faster within small inputs; the output is the same on every run.

    /usr/bin/python3 tests/fuzz/make_corpus.py [tests/fuzz/corpus]
"""
import gzip
import io
import os
import struct
import sys
import zlib
from types import SimpleNamespace

import numpy as np
from PIL import Image

PHOTO = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
FILE_SEPARATOR = b"\n--- next file ---\n"  # fuzz_targets.h's kFileSeparator
TINY_IMAGENET_WNIDS = ["n01443537", "n01629819"]  # the classes of TinyImageNetTarget


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as out:
        out.write(data)


def photo(width, height, mode="RGB"):
    return Image.open(PHOTO).convert("RGB").resize((width, height), Image.BILINEAR).convert(mode)


def cifar_planes():
    """Two crops of the photograph in CIFAR's planar R, G, B layout."""
    full = Image.open(PHOTO).convert("RGB")
    crops = [full.crop((0, 0, 256, 256)), full.crop((150, 200, 450, 500))]
    return [np.asarray(c.resize((32, 32), Image.BILINEAR)).transpose(2, 0, 1).tobytes()
            for c in crops]


def cifar_seeds(directory):
    # Two records each, from two crops of the photograph.
    planes = cifar_planes()
    write(directory, "cifar10-2-records.bin", bytes([3]) + planes[0] + bytes([7]) + planes[1])
    write(directory, "cifar100-2-records.bin",
          bytes([14, 98]) + planes[0] + bytes([5, 41]) + planes[1])


def cifar_pickle_seeds(directory):
    # CIFAR's Python version, written as Python 2 wrote the download: batches of one image (the
    # crops above) as meta + batch for the folders, and whole archives, gzip and plain tar.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    import cifar_python_files as cpf
    planes = cifar_planes()
    c10 = [SimpleNamespace(pixels=planes[k % 2], labels=[(3 + k) % 10], coarse=None,
                           filenames=[f"crop_{k}.png"]) for k in range(6)]
    c100 = [SimpleNamespace(pixels=planes[k], labels=[41 + k], coarse=[(41 + k) // 5],
                            filenames=[f"crop_{k}.png"]) for k in range(2)]
    files10 = cpf.cifar10_python_files(c10)
    files100 = cpf.cifar100_python_files(*c100)
    write(directory, "cifar10-folder", files10["batches.meta"] + FILE_SEPARATOR +
          files10["data_batch_1"])
    write(directory, "cifar100-folder", files100["meta"] + FILE_SEPARATOR + files100["train"])
    write(directory, "cifar-10-python.tar.gz",
          cpf.tar_gz("cifar-10-batches-py", files10, cpf.CIFAR10_MEMBERS))
    write(directory, "cifar-10-python.tar",
          cpf.tar("cifar-10-batches-py", files10, cpf.CIFAR10_MEMBERS))
    write(directory, "cifar-100-python.tar.gz",
          cpf.tar_gz("cifar-100-python", files100, cpf.CIFAR100_MEMBERS))


def idx_seeds(directory):
    # The first images and labels of Fashion-MNIST's four files, headers rewritten for the count.
    def head(name, count):
        with gzip.open(os.path.join(FASHION_MNIST, name)) as f:
            data = f.read()
        if "images" in name:
            rows, cols = 28, 28
            header = bytes.fromhex("00000803") + count.to_bytes(4, "big") + \
                rows.to_bytes(4, "big") + cols.to_bytes(4, "big")
            return header + data[16:16 + count * rows * cols]
        return bytes.fromhex("00000801") + count.to_bytes(4, "big") + data[8:8 + count]

    parts = [head("train-images-idx3-ubyte.gz", 3), head("train-labels-idx1-ubyte.gz", 3),
             head("t10k-images-idx3-ubyte.gz", 2), head("t10k-labels-idx1-ubyte.gz", 2)]
    write(directory, "fashion-mnist-plain", FILE_SEPARATOR.join(parts))
    write(directory, "fashion-mnist-gzip",
          FILE_SEPARATOR.join(gzip.compress(p, compresslevel=9, mtime=0) for p in parts))


def image_seeds(directory):
    def save(name, image, **options):
        buffer = io.BytesIO()
        image.save(buffer, **options)
        write(directory, name, buffer.getvalue())

    rgb = photo(24, 20)
    save("baseline.jpg", rgb, format="JPEG", quality=75)
    save("progressive.jpg", rgb, format="JPEG", quality=75, progressive=True)
    save("subsampling-444.jpg", rgb, format="JPEG", quality=90, subsampling=0)
    save("grey.jpg", photo(24, 20, "L"), format="JPEG", quality=75)
    save("rgb.png", rgb, format="PNG")
    save("grey.png", photo(24, 20, "L"), format="PNG")
    save("palette.png", rgb.convert("P", palette=Image.ADAPTIVE, colors=16), format="PNG")
    save("rgba.png", photo(24, 20, "RGBA"), format="PNG")
    save("grey-16bit.png", photo(16, 12, "L").convert("I;16"), format="PNG")
    save("rgb.bmp", photo(16, 12), format="BMP")
    save("palette.bmp", photo(16, 12).convert("P", palette=Image.ADAPTIVE, colors=16),
         format="BMP")
    save("rgb.ppm", photo(16, 12), format="PPM")
    save("grey.pgm", photo(16, 12, "L"), format="PPM")
    save("grey-16bit.pgm", photo(16, 12, "L").convert("I"), format="PPM")
    # Pillow writes no plain (ASCII) files and no scaled maximum values: by hand.
    grey = np.asarray(photo(6, 4, "L"))
    write(directory, "plain.pgm", b"P2\n# plain\n6 4\n255\n"
          + b"\n".join(b" ".join(b"%d" % v for v in row) for row in grey) + b"\n")
    write(directory, "scaled-100.ppm", b"P6\n3 2\n100\n" + bytes(range(0, 90, 5)))
    bits = (grey > 127).astype(np.uint8)
    write(directory, "bitmap.pbm", b"P4\n6 4\n" + np.packbits(bits, axis=1).tobytes())
    # BMPs Pillow does not write: run-length encoded, top down, 16-bit.
    palette = b"".join(bytes([i, i // 2, 255 - i, 0]) for i in range(256))
    rle8 = bytes([3, 7, 0, 3, 1, 2, 3, 0, 0, 0, 0, 2, 1, 0, 2, 9, 0, 0, 6, 4, 0, 1])
    write(directory, "rle8.bmp", bmp(6, 2, 8, rle8, 1, palette))
    write(directory, "top-down.bmp", bmp(3, -2, 24, bytes(range(24))))
    write(directory, "bgr555.bmp", bmp(2, 2, 16, bytes(range(0, 80, 10))))
    # PNGs Pillow does not write: Adam7-interlaced, and one that ends after its image data.
    write(directory, "interlaced.png", interlaced_png(np.asarray(photo(9, 7))))
    rgb_png = io.BytesIO()
    rgb.save(rgb_png, format="PNG")
    write(directory, "no-iend.png", rgb_png.getvalue()[:-12])


def bmp(width, height, bits, data, compression=0, palette=b""):
    """A BMP with a 40-byte header; a negative height stores rows top down."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, bits, compression, len(data), 2835,
                       2835, len(palette) // 4, 0)
    start = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", start + len(data), 0, 0, start) + info + palette + data


def interlaced_png(rgb):
    """An 8-bit RGB PNG of `rgb` (height x width x 3) in Adam7's seven passes."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    height, width = rgb.shape[:2]
    raw = b""
    for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                           (1, 0, 2, 2), (0, 1, 1, 2)):
        for row in rgb[y0::dy, x0::dx]:
            if row.size:
                raw += b"\0" + row.astype(np.uint8).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def tiny_imagenet_seeds(directory):
    # val_annotations.txt's layout: file, wnid, then the bounding box x0 y0 x1 y1.
    boxes = [(0, 32, 44, 62), (52, 55, 57, 59), (4, 0, 60, 55), (3, 3, 63, 63), (9, 27, 63, 48)]
    lines = [f"val_{i}.JPEG\t{TINY_IMAGENET_WNIDS[i % 2]}\t" + "\t".join(map(str, box))
             for i, box in enumerate(boxes)]
    write(directory, "val_annotations.txt", ("\n".join(lines) + "\n").encode())


def pack(images, labels, classes, channels, short_side, fixed=(0, 0), version=2):
    """A pack file as docs/file_format.md describes it, written independently of the C++
    writer, so that the two agree through the reader. Version 1 has no run id."""
    header = b"RDDPPACK" + struct.pack("<2I", version, 0)
    if version >= 2:
        header += struct.pack("<Q", 0x5EED0F0A11C0DE5)
    header += struct.pack("<5I", channels, short_side, fixed[0], fixed[1], len(classes))
    for name in classes:
        header += struct.pack("<I", len(name)) + name.encode()
    header += struct.pack("<I", zlib.crc32(header))
    pixels, index = b"", b""
    for image, label in zip(images, labels):
        data = np.asarray(image, dtype=np.uint8).tobytes()
        height, width = np.asarray(image).shape[:2]
        index += struct.pack("<QIIiI", len(header) + len(pixels), height, width, label,
                             zlib.crc32(data))
        pixels += data
    index += struct.pack("<I", zlib.crc32(index))
    trailer = struct.pack("<QQ", len(header) + len(pixels), len(images))
    trailer += struct.pack("<I", zlib.crc32(trailer)) + b"RDDPEND\0"
    return header + pixels + index + trailer


def pack_seeds(directory):
    # Shorter side 4: an image folder's pack (sizes differ) and a Tiny-ImageNet-like one (fixed).
    write(directory, "rgb.rddp-pack",
          pack([photo(6, 4), photo(4, 5), photo(4, 4)], [1, 0, 1], ["ant", "bee"], 3, 4))
    write(directory, "grey-fixed.rddp-pack",
          pack([photo(4, 4, "L"), photo(4, 4, "L")], [0, 2], ["a", "b", "c"], 1, 4, (4, 4)))
    # Packs of version 1 are still read.
    write(directory, "rgb-v1.rddp-pack",
          pack([photo(6, 4), photo(4, 5), photo(4, 4)], [1, 0, 1], ["ant", "bee"], 3, 4,
               version=1))


def options_seeds(directory):
    # Command lines of the README, scripts/quickstart.sh, the job scripts and tests/cli.
    lines = {
        "readme": ["--data", "/data/imagenet"],
        "readme-eval": ["--data", "/data/imagenet", "--init", "resnet18.rddp", "--eval"],
        "quickstart-cpu": ["--data", "/usr/share/datasets/fashion-mnist", "--device", "cpu",
                           "--epochs", "1", "--batch-size", "64", "--limit-train", "4096",
                           "--limit-val", "1000", "--print-every", "16", "--log-json",
                           "runs/quickstart/metrics.jsonl", "--save-weights",
                           "runs/quickstart/weights.rddp"],
        "job-requeue": ["--data", "/data/imagenet", "--checkpoint-dir",
                        "checkpoints/train-1234", "--resume"],
        "resume-sgd": ["--dataset", "synthetic", "--device", "cpu", "--batch-size", "8",
                       "--limit-train", "64", "--limit-val", "16", "--epochs", "2",
                       "--lr-schedule", "cosine", "--warmup-epochs", "0.5", "--optimizer",
                       "sgd", "--nesterov", "--lr", "0.05", "--max-steps", "16",
                       "--checkpoint-dir", "ck-sgd", "--resume"],
        "step-schedule": ["--data=/data/cifar", "--lr-schedule=step", "--lr-step-epochs=30,60,80",
                          "--lr-gamma", "0.1", "--seed", "3", "--val-split", "0.1",
                          "--augment", "crop-flip", "--stem", "cifar", "--bucket-mb", "25",
                          "--comm-timeout", "600", "--precision", "fp32", "--deterministic",
                          "--conv-algorithms", "heuristic"],
        "help": ["--help"],
    }
    for name, arguments in lines.items():
        write(directory, name, b"\0".join(a.encode() for a in arguments))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    cifar_seeds(os.path.join(root, "cifar"))
    cifar_pickle_seeds(os.path.join(root, "cifar_pickle"))
    idx_seeds(os.path.join(root, "idx"))
    image_seeds(os.path.join(root, "image"))
    tiny_imagenet_seeds(os.path.join(root, "tiny_imagenet"))
    options_seeds(os.path.join(root, "options"))
    pack_seeds(os.path.join(root, "pack"))


if __name__ == "__main__":
    main()
