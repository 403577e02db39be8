#!/usr/bin/env python3
"""The same measurement as decode_bench with Pillow (what torchvision's ImageFolder uses):
single-thread decoding of in-memory JPEGs, then decoding plus torchvision's
RandomResizedCrop(224) + RandomHorizontalFlip on the PIL image, in images per second of CPU
time.

    bench/pillow_decode.py DIR [SECONDS]
"""
import io
import os
import sys
import time

from PIL import Image


def measure(files, seconds, work):
    for data in files:
        work(data)
    images, pixels, start = 0, 0, time.process_time()
    while True:
        for data in files:
            pixels += work(data)
        images += len(files)
        elapsed = time.process_time() - start
        if elapsed >= seconds:
            return images / elapsed, pixels / elapsed / 1e6


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: {sys.argv[0]} DIR_OF_JPEGS [SECONDS]")
    seconds = float(sys.argv[2]) if len(sys.argv) == 3 else 5.0
    names = sorted(n for n in os.listdir(sys.argv[1]) if n.lower().endswith((".jpg", ".jpeg")))
    if not names:
        sys.exit(f"no JPEGs in {sys.argv[1]}: make some with bench/make_jpegs.py")
    files = []
    for name in names:
        with open(os.path.join(sys.argv[1], name), "rb") as f:
            files.append(f.read())

    def decode(data):
        image = Image.open(io.BytesIO(data)).convert("RGB")  # convert() loads: a full decode
        return image.width * image.height

    decode_rate, megapixels = measure(files, seconds, decode)
    print(f"Pillow {Image.__version__}, {len(files)} files, one thread:")
    print(f"  decode                                   {decode_rate:8.1f} images/s  {megapixels:7.1f} MP/s")
    try:
        import torch
        import torchvision.transforms as T
    except ImportError:
        print("  (no torchvision: decode + RandomResizedCrop not measured)")
        return
    torch.set_num_threads(1)
    train = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])

    def augment(data):
        image = Image.open(io.BytesIO(data)).convert("RGB")
        train(image)
        return image.width * image.height

    augment_rate, _ = measure(files, seconds, augment)
    print(f"  decode + RandomResizedCrop(224) + flip   {augment_rate:8.1f} images/s")


if __name__ == "__main__":
    main()
