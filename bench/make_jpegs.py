#!/usr/bin/env python3
"""Writes ImageNet-like JPEGs for the decode benchmark: 500x375 (ImageNet's most common size),
quality 90, with content that compresses like a photograph: 1/f noise (the spectrum of
natural images), a few blurred objects with edges, and sensor-like noise. A flat or simple
image would decode unrealistically fast.

    bench/make_jpegs.py --out /tmp/jpegs --count 200
"""
import argparse
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def pink_noise(rng, height, width):
    """Noise whose spectrum falls as 1/f, as natural images' does: detail at every scale."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    amplitude = 1.0 / np.maximum(np.hypot(fx, fy), 1.0 / max(height, width))
    phase = rng.uniform(0, 2 * np.pi, size=amplitude.shape)
    field = np.fft.irfft2(amplitude * np.exp(1j * phase), s=(height, width))
    return (field - field.mean()) / field.std()


def photo_like(rng, width, height):
    # Correlated colour channels, as in photographs: a shared luminance field plus weaker
    # per-channel fields.
    luminance = pink_noise(rng, height, width)
    array = np.stack([rng.uniform(90, 160) + 45 * luminance + 20 * pink_noise(rng, height, width)
                      for _ in range(3)], axis=-1)
    image = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8), "RGB")
    # A few objects with edges and a light blur, as a lens gives.
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(3, 8))):
        x0, y0 = rng.uniform(-100, width), rng.uniform(-100, height)
        x1, y1 = x0 + rng.uniform(40, 250), y0 + rng.uniform(40, 250)
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        draw.ellipse([x0, y0, x1, y1], fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(radius=0.6))
    # Texture on the objects too, and sensor noise.
    array = np.asarray(image).astype(np.float32)
    array += 12 * pink_noise(rng, height, width)[..., None] + rng.normal(0, 3, size=array.shape)
    return Image.fromarray(np.clip(array, 0, 255).astype(np.uint8), "RGB")


def main():
    parser = argparse.ArgumentParser(description="ImageNet-like JPEGs for bench/decode_bench")
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--height", type=int, default=375)
    parser.add_argument("--quality", type=int, default=90)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    total = 0
    for i in range(args.count):
        path = os.path.join(args.out, f"{i:05d}.jpg")
        photo_like(rng, args.width, args.height).save(path, quality=args.quality)
        total += os.path.getsize(path)
    print(f"wrote {args.count} JPEGs of {args.width}x{args.height} to {args.out}, "
          f"{total / args.count / 1024:.0f} KiB on average")


if __name__ == "__main__":
    main()
