"""Image preparation against torchvision on PIL images: Resize + CenterCrop, the crop and
resize of RandomResizedCrop for given boxes, RandomCrop's zero padding and the flip, and
ToTensor + Normalize. Every byte and every float must be equal. The C++ side is the unit test
program's exported case "parity export: image transforms"."""
import os
import sys
import tempfile

import numpy as np
import torchvision.transforms as T
import torchvision.transforms.functional as F

from image_export import make_image, mismatch, run_export

MEANS = {"imagenet": ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
         "cifar10": ([0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]),
         "fashion-mnist": ([0.2860], [0.3530])}


def main():
    rng = np.random.default_rng(0)
    checks = []  # (description, expected array, output path, dtype)
    with tempfile.TemporaryDirectory() as tmp:
        lines = []

        def add(what, image, channels, args, expected, dtype=np.uint8):
            n = len(checks)
            src, out = os.path.join(tmp, f"in{n}.png"), os.path.join(tmp, f"out{n}")
            image.save(src)
            lines.append(" ".join(map(str, [what, src, out, channels] + args)))
            checks.append((f"{what} {image.mode} {image.size[0]}x{image.size[1]} {args}",
                           np.asarray(expected), out, dtype))

        sizes = [(500, 375), (375, 500), (256, 256), (300, 301), (37, 1000), (1000, 37), (60, 40),
                 (224, 224), (223, 225), (64, 64)]
        for width, height in sizes:
            for mode in ("RGB", "L"):
                image = make_image(rng, height, width, mode)
                channels = 3 if mode == "RGB" else 1
                for size, resize in ((224, 256), (64, 73), (32, 36)):
                    expected = T.Compose([T.Resize(resize), T.CenterCrop(size)])(image)
                    add("eval", image, channels, [size, resize], expected)
                for _ in range(3):
                    h = int(rng.integers(1, height + 1))
                    w = int(rng.integers(1, width + 1))
                    top = int(rng.integers(0, height - h + 1))
                    left = int(rng.integers(0, width - w + 1))
                    size = int(rng.choice([32, 64, 224]))
                    expected = F.resized_crop(image, top, left, h, w, [size, size])
                    add("resized_crop", image, channels, [top, left, h, w, size], expected)
        for mode in ("RGB", "L"):
            image = make_image(rng, 32, 32, mode)
            channels = 3 if mode == "RGB" else 1
            for top, left, flip in ((-4, -4, 0), (3, -2, 1), (4, 4, 1), (0, 1, 0)):
                expected = F.crop(F.pad(image, 4), top + 4, left + 4, 32, 32)
                if flip:
                    expected = F.hflip(expected)
                add("crop_flip", image, channels, [top, left, 32, flip], expected)
        for preset, (mean, std) in MEANS.items():
            mode = "L" if len(mean) == 1 else "RGB"
            image = make_image(rng, 21, 34, mode)
            expected = T.Compose([T.ToTensor(), T.Normalize(mean, std)])(image).numpy()
            add("normalize", image, len(mean), [preset], expected, np.float32)

        run_export(lines, tmp)
        failures = 0
        for description, expected, out, dtype in checks:
            why = mismatch(out, expected, dtype, "torchvision")
            if why:
                failures += 1
                print(f"MISMATCH {description}: {why}")
    print(f"{len(checks) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
