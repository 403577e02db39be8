"""Decoding against torchvision's loader, Image.open(path).convert("RGB") (and "L" for one
channel): JPEGs of every chroma subsampling, progressive and optimised ones, greyscale and
CMYK ones, a damaged one libjpeg only warns about, and PNGs and BMPs that need converting.
Every byte must be equal, and a file Pillow refuses (a cut-off JPEG) must be refused too. The
C++ side is the unit test program's exported case "parity export: image transforms"."""
import io
import os
import sys
import tempfile

import numpy as np
from PIL import Image, features

from image_export import make_image, mismatch, run_export


def jpeg_bytes(image, **options):
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", **options)
    return buffer.getvalue()


def with_junk_before_eoi(data):
    """Bytes between the scan and its end marker: libjpeg warns ("extraneous bytes before
    marker 0xd9") and decodes on, and so does Pillow."""
    assert data[-2:] == b"\xff\xd9"
    return data[:-2] + b"\x12\x34\x56" + data[-2:]


def cases(rng, corpus):
    """(name, file bytes, suffix)"""
    for width, height in ((500, 375), (37, 1000), (17, 9), (1, 1), (224, 224), (333, 257)):
        rgb = make_image(rng, height, width, "RGB")
        for subsampling in (0, 1, 2):  # 4:4:4, 4:2:2, 4:2:0
            for quality in (95, 75, 30):
                yield (f"jpeg {width}x{height} subsampling {subsampling} quality {quality}",
                       jpeg_bytes(rgb, subsampling=subsampling, quality=quality), ".jpg")
        yield f"progressive jpeg {width}x{height}", jpeg_bytes(rgb, progressive=True), ".jpg"
        yield f"optimised jpeg {width}x{height}", jpeg_bytes(rgb, optimize=True), ".jpg"
        grey = make_image(rng, height, width, "L")
        yield f"greyscale jpeg {width}x{height}", jpeg_bytes(grey), ".jpg"
        yield f"cmyk jpeg {width}x{height}", jpeg_bytes(rgb.convert("CMYK")), ".jpg"
        yield f"png rgb {width}x{height}", png_bytes(rgb), ".png"
        yield f"png rgba {width}x{height}", png_bytes(rgb.convert("RGBA")), ".png"
        yield f"png palette {width}x{height}", png_bytes(rgb.quantize(200)), ".png"
        yield f"png grey+alpha {width}x{height}", png_bytes(grey.convert("LA")), ".png"
        buffer = io.BytesIO()
        rgb.save(buffer, "BMP")
        yield f"bmp rgb {width}x{height}", buffer.getvalue(), ".bmp"
    photo = make_image(rng, 96, 128, "RGB")
    yield "jpeg with junk before its end marker", with_junk_before_eoi(jpeg_bytes(photo)), ".jpg"
    for name in sorted(os.listdir(corpus)):
        if name.endswith(".jpg"):
            with open(os.path.join(corpus, name), "rb") as f:
                yield f"corpus {name}", f.read(), ".jpg"


def png_bytes(image):
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def pillow_decode(path, mode):
    """torchvision's loader (datasets.folder.pil_loader), with the mode ours is asked for."""
    try:
        with open(path, "rb") as f:
            return np.asarray(Image.open(f).convert(mode)), None
    except OSError as error:
        return None, str(error)


def main():
    corpus = os.path.join(os.environ["RDDP_SOURCE_DIR"], "tests", "fuzz", "corpus", "image")
    print(f"Pillow {Image.__version__}, its libjpeg {features.version('jpg')}")
    rng = np.random.default_rng(1)
    checks = []  # (description, path, output path, channels)
    with tempfile.TemporaryDirectory() as tmp:
        lines = []
        photo = jpeg_bytes(make_image(rng, 120, 160, "RGB"))
        every = list(cases(rng, corpus)) + [("cut-off jpeg", photo[:len(photo) * 2 // 3], ".jpg")]
        for n, (name, data, suffix) in enumerate(every):
            path = os.path.join(tmp, f"in{n}{suffix}")
            with open(path, "wb") as f:
                f.write(data)
            for channels in (3, 1):
                out = os.path.join(tmp, f"out{n}-{channels}")
                lines.append(f"decode {path} {out} {channels}")
                checks.append((f"{name}, {channels} channel(s)", path, out, channels))
        run_export(lines, tmp)
        failures = refused = 0
        for description, path, out, channels in checks:
            expected, pillow_error = pillow_decode(path, "RGB" if channels == 3 else "L")
            our_error = None
            if os.path.exists(out + ".error"):
                with open(out + ".error") as f:
                    our_error = f.read()
            if pillow_error or our_error:
                if not (pillow_error and our_error):
                    failures += 1
                    print(f"MISMATCH {description}: Pillow says {pillow_error!r}, "
                          f"we say {our_error!r}")
                elif path not in our_error:
                    failures += 1
                    print(f"MISMATCH {description}: our message does not name the file: "
                          f"{our_error}")
                else:
                    refused += 1
                continue
            why = mismatch(out, expected, np.uint8, "Pillow")
            if why:
                failures += 1
                print(f"MISMATCH {description}: {why}")
    print(f"{len(checks) - failures} passed ({refused} refused by both), {failures} failed")
    sys.exit(1 if failures or not refused else 0)


if __name__ == "__main__":
    main()
