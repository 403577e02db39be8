"""Decoding against torchvision's loader, Image.open(path).convert("RGB") (and "L" for one
channel): JPEGs of every chroma subsampling, progressive and optimised ones, greyscale and
CMYK ones, a damaged one libjpeg only warns about, PNGs of 1 to 16 bits, interlaced ones, and
damaged ones (bad CRCs, cut, corrupt image data: each decoded or refused as Pillow does), BMPs
of every depth,
header, bitfield layout and row order Pillow reads, run-length encoded ones included, and
PGM/PPM/PBM files, binary and plain, of maximum values from 1 to 65535.
Every byte must be equal, and a file Pillow refuses (a cut-off JPEG) must be refused too. The
C++ side is the unit test program's exported case "parity export: image transforms"."""
import io
import os
import struct
import sys
import tempfile
import warnings
import zlib

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
    yield from png_depth_cases(rng)
    yield from png_damage_cases(rng)
    yield from pnm_cases(rng)
    yield from bmp_cases(rng)
    photo = make_image(rng, 96, 128, "RGB")
    yield "jpeg with junk before its end marker", with_junk_before_eoi(jpeg_bytes(photo)), ".jpg"
    for name in sorted(os.listdir(corpus)):
        if name.endswith(".jpg"):
            with open(os.path.join(corpus, name), "rb") as f:
                yield f"corpus {name}", f.read(), ".jpg"


def png_chunk(kind, data, crc=None):
    if crc is None:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2))


def png_scanlines(rows, depth, filters=(0,)):
    """Rows of samples packed big-endian at `depth` bits, each after a filter byte taken in
    turn from `filters`: the pixels are then what each filter reconstructs from those bytes,
    which exercises every filter's arithmetic."""
    out = b""
    for n, row in enumerate(rows):
        row = np.asarray(row).reshape(-1)
        if depth == 16:
            data = row.astype(">u2").tobytes()
        elif depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:
            per_byte = 8 // depth
            padded = np.concatenate([row, np.zeros(-len(row) % per_byte, dtype=row.dtype)])
            packed = np.zeros(len(padded) // per_byte, dtype=np.uint8)
            for k in range(per_byte):
                packed |= (padded[k::per_byte].astype(np.uint8) << (8 - depth * (k + 1)))
            data = packed.tobytes()
        out += bytes([filters[n % len(filters)]]) + data
    return out


def raw_png(width, height, depth, colour_type, rows, trns=None, interlaced=False, plte=None):
    """A PNG of any bit depth, which Pillow cannot write; `rows` is height x samples."""
    header = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, int(interlaced))
    rows = np.asarray(rows).reshape(height, -1)
    if interlaced:
        samples = rows.reshape(height, width, -1)
        raw = b"".join(png_scanlines(samples[y0::dy, x0::dx].reshape(
            len(range(y0, height, dy)), -1), depth)
            for x0, y0, dx, dy in ADAM7 if width > x0 and height > y0)
    else:
        raw = png_scanlines(rows, depth)
    return (PNG_SIGNATURE + png_chunk(b"IHDR", header)
            + (png_chunk(b"PLTE", plte) if plte is not None else b"")
            + (png_chunk(b"tRNS", trns) if trns is not None else b"")
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def png_depth_cases(rng):
    """16-bit PNGs (a greyscale one is Pillow's mode "I", which converting clips at 255) and
    greyscale PNGs of 1, 2 and 4 bits."""
    width, height = 13, 7
    grey = rng.integers(0, 65536, size=(height, width))
    grey[0, :6] = [0, 1, 255, 256, 65535, 300]
    yield "png grey 16-bit", raw_png(width, height, 16, 0, grey), ".png"
    yield ("png grey 16-bit with tRNS",
           raw_png(width, height, 16, 0, grey, trns=struct.pack(">H", int(grey[1, 1]))), ".png")
    for colour_type, samples in ((2, 3), (4, 2), (6, 4)):
        values = rng.integers(0, 65536, size=(height, width * samples))
        yield f"png 16-bit colour type {colour_type}", raw_png(width, height, 16, colour_type,
                                                                values), ".png"
    for depth in (1, 2, 4):
        values = rng.integers(0, 1 << depth, size=(height, width))
        yield f"png grey {depth}-bit", raw_png(width, height, depth, 0, values), ".png"
    for width, height in ((13, 11), (1, 1), (3, 9), (17, 2)):
        for name, depth, colour_type, samples, top in (("rgb", 8, 2, 3, 256),
                                                        ("grey 16-bit", 16, 0, 1, 300),
                                                        ("rgba 16-bit", 16, 6, 4, 65536),
                                                        ("grey 2-bit", 2, 0, 1, 4),
                                                        ("palette 4-bit", 4, 3, 1, 16)):
            values = rng.integers(0, top, size=(height, width * samples))
            plte = bytes(rng.integers(0, 256, size=48).astype(np.uint8)) if colour_type == 3 \
                else None
            yield (f"png interlaced {name} {width}x{height}",
                   raw_png(width, height, depth, colour_type, values, interlaced=True,
                           plte=plte), ".png")


def png_damage_cases(rng):
    """Damaged and unusual PNGs, each of which Pillow decodes or refuses in its own way: CRCs
    checked only before the image data, the image data inflated as Pillow's reader hands it
    over (so that zlib's Adler-32 is checked when Pillow's zlib checks it), the image done when
    its last row is, palettes shorter than the indices. Then random cuts and flipped bytes."""
    width, height = 40, 30
    rgb = rng.integers(0, 256, size=(height, width * 3))
    raw = png_scanlines(rgb, 8, filters=(0, 1, 2, 3, 4))
    stream = zlib.compress(raw)
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    end = png_chunk(b"IEND", b"")

    def png(*chunks):
        return PNG_SIGNATURE + b"".join(chunks)

    good = png(header, png_chunk(b"IDAT", stream), end)
    yield "png with every filter type", good, ".png"
    yield "png, bad CRC before the image data", png(header, png_chunk(b"tEXt", b"a\0b", 5),
                                                   png_chunk(b"IDAT", stream), end), ".png"
    yield "png, bad IDAT CRC only", png(header, png_chunk(b"IDAT", stream, 1), end), ".png"
    yield "png, bad CRC after the image data", png(header, png_chunk(b"IDAT", stream),
                                                  png_chunk(b"tEXt", b"a\0b", 5), end), ".png"
    for where in (2, len(stream) // 2, len(stream) - 1):
        flipped = bytearray(stream)
        flipped[where] ^= 0x10
        yield (f"png, image data byte {where} flipped",
               png(header, png_chunk(b"IDAT", bytes(flipped)), end), ".png")
    for cut in (3, 5, 8, 13):
        yield f"png cut {cut} bytes before its end", good[:-cut], ".png"
    yield "png without IEND", png(header, png_chunk(b"IDAT", stream)), ".png"
    yield "png cut in its image data", good[:len(good) // 2], ".png"
    yield "png with garbage after its zlib stream", png(header, png_chunk(b"IDAT", stream + b"xyz"),
                                                        end), ".png"
    for split in (7, len(stream) - 2):  # the second splits zlib's Adler-32 across two chunks
        yield (f"png with its image data split at {split}",
               png(header, png_chunk(b"IDAT", stream[:split]), png_chunk(b"IDAT", b""),
                   png_chunk(b"IDAT", stream[split:]), end), ".png")
    bad_adler = stream[:-1] + bytes([stream[-1] ^ 1])
    yield "png with a wrong Adler-32", png(header, png_chunk(b"IDAT", bad_adler), end), ".png"
    yield ("png with a wrong Adler-32 in a chunk of its own",
           png(header, png_chunk(b"IDAT", bad_adler[:-4]), png_chunk(b"IDAT", bad_adler[-4:]),
               end), ".png")
    bad_filter = bytearray(raw)
    bad_filter[(width * 3 + 1) * 2] = 7
    yield "png with filter type 7", png(header, png_chunk(b"IDAT", zlib.compress(bytes(
        bad_filter))), end), ".png"
    yield "png with a chunk of an invalid name", png(header, png_chunk(b"a-b!", b""),
                                                     png_chunk(b"IDAT", stream), end), ".png"
    yield "png with no image data", png(header, end), ".png"
    yield "png with an IHDR cut short", png(png_chunk(b"IHDR", b"\0\0\0\1\0\0\0\1\x08"),
                                            png_chunk(b"IDAT", stream), end), ".png"
    yield "png of 3-bit samples", png(png_chunk(b"IHDR", struct.pack(
        ">IIBBBBB", width, height, 3, 0, 0, 0, 0)), png_chunk(b"IDAT", stream), end), ".png"
    # More than 64 KiB of image data in 8 KiB chunks, as libpng writes: Pillow's reader's pieces.
    big = rng.integers(0, 256, size=(300, 300 * 3))
    big_stream = zlib.compress(png_scanlines(big, 8), 0)
    big_header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 300, 300, 8, 2, 0, 0, 0))
    pieces = [big_stream[k:k + 8192] for k in range(0, len(big_stream), 8192)]
    yield ("png, 270 KB of image data in 8 KiB chunks",
           png(big_header, *[png_chunk(b"IDAT", p) for p in pieces], end), ".png")
    yield ("png, 270 KB of image data in one chunk, wrong Adler-32",
           png(big_header, png_chunk(b"IDAT", big_stream[:-1] + b"\0"), end), ".png")
    # 259 rows of 84 pixels are 65,527 bytes with their filter bytes, which stored (not
    # compressed) make a zlib stream of 65,538: Pillow's first 64 KiB piece ends inside the
    # Adler-32, the last row is done before it, and a wrong one goes unnoticed.
    edge = rng.integers(0, 256, size=(259, 84 * 3))
    edge_stream = zlib.compress(png_scanlines(edge, 8), 0)
    assert len(edge_stream) == 65538
    edge_header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 84, 259, 8, 2, 0, 0, 0))
    yield ("png whose Adler-32 Pillow reads in two pieces, wrong",
           png(edge_header, png_chunk(b"IDAT", edge_stream[:-1] + b"\0"), end), ".png")
    indices = rng.integers(0, 256, size=(height, width))
    for colours in (0, 5, 256):
        plte = bytes(rng.integers(0, 256, size=3 * colours).astype(np.uint8))
        yield (f"png palette of {colours} colours for indices up to 255",
               raw_png(width, height, 8, 3, indices, plte=plte if colours else None), ".png")
    yield "png palette of 4 colours and a partial one", raw_png(
        width, height, 8, 3, indices, plte=bytes(14)), ".png"
    yield "png palette of 257 colours", raw_png(width, height, 8, 3, indices,
                                                plte=bytes(771)), ".png"
    yield "png palette with transparency", raw_png(width, height, 8, 3, indices,
                                                   plte=bytes(range(256)) * 3,
                                                   trns=bytes(range(0, 256, 3))), ".png"
    for n in range(30):
        mutated = bytearray(good)
        if n % 3 == 0:
            mutated = mutated[:int(rng.integers(40, len(good)))]
        else:
            for _ in range(int(rng.integers(1, 3))):
                mutated[int(rng.integers(8, len(good)))] ^= 1 << int(rng.integers(0, 8))
        yield f"png, random damage {n}", bytes(mutated), ".png"


def pnm_cases(rng):
    """Binary PGM/PPM of every kind of maximum value (8-bit as it is, scaled, 16-bit), plain
    ones with comments, and PBM bitmaps under a name torchvision's ImageFolder accepts."""
    width, height = 11, 5
    for magic, bands in ((b"P5", 1), (b"P6", 3)):
        for maximum in (1, 6, 100, 255, 256, 1000, 65534, 65535):
            samples = rng.integers(0, maximum + 1, size=height * width * bands)
            samples[:3] = [0, maximum, maximum // 2]
            data = samples.astype(">u2" if maximum > 255 else np.uint8).tobytes()
            header = b"%s\n# by hand\n%d %d\n%d\n" % (magic, width, height, maximum)
            yield f"{magic.decode()} maximum {maximum}", header + data, ".pgm"
            text = b" ".join(b"%d" % v for v in samples)
            plain = b"P2" if magic == b"P5" else b"P3"
            header = b"%s %d %d\n%d # plain\n" % (plain, width, height, maximum)
            yield f"{plain.decode()} maximum {maximum}", header + text + b"\n", ".ppm"
    bits = rng.integers(0, 2, size=(height, width))
    packed = np.packbits(bits.astype(np.uint8), axis=1).tobytes()
    yield "P4 bitmap", b"P4\n%d %d\n" % (width, height) + packed, ".pgm"
    text = b"\n".join(b"".join(b"%d" % v for v in row) + b" # a row" for row in bits)
    yield "P1 bitmap", b"P1\n%d %d\n" % (width, height) + text, ".pgm"
    yield "P6 cut short", b"P6 4 4 255\n" + bytes(40), ".ppm"
    yield "P2 sample above its maximum", b"P2 2 1 6 1 7", ".pgm"
    yield "P5 maximum 0", b"P5 1 1 0\n\x01", ".pgm"


def raw_bmp(width, height, bits, data, compression=0, palette=b"", header_size=40,
            masks=b"", offset=None, colours=None):
    """A BMP with any header, depth and compression; a negative height stores rows top down.
    For a 40-byte header, masks follow it; for longer ones they are inside it."""
    core = header_size == 12
    if core:
        info = struct.pack("<IHHHH", 12, width, height, 1, bits)
    else:
        count = len(palette) // 4 if colours is None else colours
        info = struct.pack("<IiiHHIIiiII", header_size, width, height, 1, bits, compression,
                           len(data), 2835, 2835, count, 0)
        if header_size > 40:
            info += masks + bytes(header_size - 40 - len(masks))
        else:
            info += masks
    start = 14 + len(info) + len(palette)
    return (b"BM" + struct.pack("<IHHI", start + len(data), 0, 0,
                                start if offset is None else offset) + info + palette + data)


def bmp_rows(rng, width, height, bits):
    stride = (width * bits + 31) // 32 * 4
    return bytes(rng.integers(0, 256, size=stride * height).astype(np.uint8))


def rle_stream(rng, width, rle4):
    """Encoded runs (some past the row's end), absolute runs of odd and even lengths, ends of
    line, deltas and ends of bitmap, at random: Pillow's run-length decoder's every path."""
    out = bytearray()
    for _ in range(rng.integers(3, 30)):
        op = rng.choice(["run", "absolute", "end of line", "delta", "end"],
                        p=[.52, .25, .12, .08, .03])
        if op == "run":
            out += bytes([rng.integers(1, width + 3), rng.integers(0, 256)])
        elif op == "absolute":
            n = int(rng.integers(3, 12))
            out += bytes([0, n]) + bytes(rng.integers(0, 256, size=n // 2 if rle4 else n)
                                         .astype(np.uint8))
            if len(out) % 2:
                out += b"\0"
        elif op == "end of line":
            out += b"\0\0"
        elif op == "delta":
            out += b"\0\2" + bytes(rng.integers(0, 4, size=4).astype(np.uint8))
        else:
            out += b"\0\1"
    return bytes(out)


def bmp_cases(rng):
    image = make_image(rng, 11, 13, "RGB")
    for mode in ("1", "L", "RGBA"):
        buffer = io.BytesIO()
        image.convert(mode).save(buffer, "BMP")
        yield f"bmp mode {mode} as Pillow writes it", buffer.getvalue(), ".bmp"
    buffer = io.BytesIO()
    image.quantize(16).save(buffer, "BMP")
    yield "bmp 16-colour palette as Pillow writes it", buffer.getvalue(), ".bmp"
    # Every 16-bit value once.
    sweep = np.arange(65536, dtype="<u2").tobytes()
    yield "bmp 16-bit 5-5-5, every value", raw_bmp(256, 256, 16, sweep), ".bmp"
    for name, masks in (("5-6-5", (0xF800, 0x7E0, 0x1F)), ("5-5-5", (0x7C00, 0x3E0, 0x1F))):
        yield (f"bmp 16-bit bitfields {name}, every value",
               raw_bmp(256, 256, 16, sweep, 3, masks=struct.pack("<3I", *masks)), ".bmp")
    width, height = 7, 5
    pixels32 = bmp_rows(rng, width, height, 32)
    for masks in ((0xFF0000, 0xFF00, 0xFF, 0), (0xFF000000, 0xFF0000, 0xFF00, 0),
                  (0xFF000000, 0xFF0000, 0xFF00, 0xFF), (0xFF, 0xFF00, 0xFF0000, 0xFF000000),
                  (0xFF0000, 0xFF00, 0xFF, 0xFF000000), (0, 0, 0, 0)):
        yield (f"bmp 32-bit bitfields {[hex(m) for m in masks]}",
               raw_bmp(width, height, 32, pixels32, 3, header_size=108,
                       masks=struct.pack("<4I", *masks)), ".bmp")
    yield "bmp 32-bit", raw_bmp(width, height, 32, pixels32), ".bmp"
    pixels24 = bmp_rows(rng, width, height, 24)
    yield ("bmp 24-bit bitfields", raw_bmp(width, height, 24, pixels24, 3,
                                            masks=struct.pack("<3I", 0xFF0000, 0xFF00, 0xFF)),
           ".bmp")
    yield "bmp 24-bit top down", raw_bmp(width, -height, 24, pixels24), ".bmp"
    yield "bmp 24-bit, 64-byte header", raw_bmp(width, height, 24, pixels24,
                                                 header_size=64), ".bmp"
    yield "bmp 24-bit, 12-byte header", raw_bmp(width, height, 24, pixels24,
                                                 header_size=12), ".bmp"
    yield "bmp 24-bit, last row unpadded", raw_bmp(width, height, 24, pixels24[:-3]), ".bmp"
    yield "bmp 24-bit cut short", raw_bmp(width, height, 24, pixels24[:-4]), ".bmp"
    palette = bytes(rng.integers(0, 256, size=256 * 4).astype(np.uint8))
    pixels8 = bmp_rows(rng, width, height, 8)
    yield "bmp 8-bit top down", raw_bmp(width, -height, 8, pixels8, palette=palette), ".bmp"
    yield ("bmp 8-bit, 12-byte header", raw_bmp(width, height, 8, pixels8, header_size=12,
                                                 palette=palette[:768]), ".bmp")
    yield ("bmp 8-bit, 5 colours for indices up to 255",
           raw_bmp(width, height, 8, pixels8, palette=palette[:20]), ".bmp")
    yield ("bmp 8-bit, data offset without the palette",
           raw_bmp(width, height, 8, pixels8, palette=palette, offset=54), ".bmp")
    yield ("bmp 8-bit, data offset 0", raw_bmp(width, height, 8, pixels8, palette=palette,
                                                offset=0), ".bmp")
    yield ("bmp 4-bit", raw_bmp(width, height, 4, bmp_rows(rng, width, height, 4),
                                palette=palette[:64]), ".bmp")
    yield ("bmp 1-bit, two colours", raw_bmp(width, height, 1, bmp_rows(rng, width, height, 1),
                                             palette=palette[:8]), ".bmp")
    for n in range(40):
        rle4 = n % 2 == 1
        width, height = int(rng.integers(1, 9)), int(rng.integers(1, 6))
        yield (f"bmp {'RLE4' if rle4 else 'RLE8'} {n}",
               raw_bmp(width, height * (-1 if n % 5 == 4 else 1), 4 if rle4 else 8,
                       rle_stream(rng, width, rle4), 2 if rle4 else 1,
                       palette=palette[:64 if rle4 else 1024]), ".bmp")
    yield "bmp with JPEG compression", raw_bmp(2, 2, 24, bytes(16), 4), ".bmp"
    yield "bmp of 2 bits a pixel", raw_bmp(2, 2, 2, bytes(8), palette=palette[:16]), ".bmp"
    yield ("bmp 32-bit bitfields Pillow does not know",
           raw_bmp(2, 2, 32, bytes(16), 3, masks=struct.pack("<3I", 0xFF, 0xFF00, 0xFF0000)),
           ".bmp")


def png_bytes(image):
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def pillow_size(path):
    """(width, height) of an image Pillow decodes, else None."""
    image, _ = pillow_decode(path, "RGB")
    return None if image is None else (image.shape[1], image.shape[0])


def crop_boxes(rng, size):
    """(top, left, height, width): a box at each corner, one inside, and the whole image."""
    width, height = size
    boxes = [(0, 0, height, width)]
    for corner in range(5):
        h, w = int(rng.integers(1, height + 1)), int(rng.integers(1, width + 1))
        top = 0 if corner in (0, 1) else height - h if corner in (2, 3) else int(
            rng.integers(0, height - h + 1))
        left = 0 if corner in (0, 2) else width - w if corner in (1, 3) else int(
            rng.integers(0, width - w + 1))
        boxes.append((top, left, h, w))
    return boxes


def pillow_decode(path, mode):
    """torchvision's loader (datasets.folder.pil_loader), with the mode ours is asked for."""
    try:
        with open(path, "rb") as f, warnings.catch_warnings():
            # A palette's transparency given per entry: Pillow warns, and converts as always.
            warnings.simplefilter("ignore", UserWarning)
            return np.asarray(Image.open(f).convert(mode)), None
    except (OSError, ValueError) as error:  # PpmImagePlugin raises ValueError for bad data
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
                checks.append((f"{name}, {channels} channel(s)", path, out, channels, None))
            # Regions, which JPEGs decode alone (decode_image_crop): one at each corner and
            # one inside, against Pillow's whole image cropped.
            size = pillow_size(path)
            for k, box in enumerate(crop_boxes(rng, size) if size else []):
                out = os.path.join(tmp, f"out{n}-crop{k}")
                lines.append(f"decode_crop {path} {out} 3 {' '.join(map(str, box))}")
                checks.append((f"{name}, region {box}", path, out, 3, box))
        run_export(lines, tmp)
        failures = refused = 0
        for description, path, out, channels, box in checks:
            expected, pillow_error = pillow_decode(path, "RGB" if channels == 3 else "L")
            if box is not None and expected is not None:
                top, left, height, width = box
                expected = expected[top:top + height, left:left + width]
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
