#pragma once
// Decoding PNG files as Pillow 9's PngImagePlugin does, with zlib as Pillow inflates them.
// stb_image decoded valid files to the same bytes, but not damaged or unusual ones:
//  - it checks neither chunk CRCs nor zlib's Adler-32, so a file whose image data is corrupt
//    decoded to wrong pixels, where Pillow refuses it;
//  - it refused a file cut off after its image data (no IEND), which Pillow reads;
//  - palette indices past the PLTE chunk read stb_image's uninitialised memory; Pillow reads
//    them as grey (i, i, i).
// Pillow's rules kept: the CRC of every chunk before the image data is checked (none after it);
// the image data is the run of IDAT chunks from the first, inflated a row at a time from the
// pieces Pillow's reader hands its decoder (at most 64 KiB, never across a chunk), so that the
// Adler-32 is checked exactly when Pillow's zlib checks it; the image ends when its last row
// does, whatever follows.
#include <cstddef>
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/image_decode.h"

namespace rddp::data {

// True when `bytes` start with the PNG signature.
bool looks_like_png(const uint8_t* bytes, size_t size);

// The size and stored channel count (1 greyscale or palette, 2 grey+alpha, 3 RGB, 4 RGBA).
// Throws Error naming `what` for what Pillow refuses before decoding (a damaged or cut chunk
// before the image data, a bad CRC there, an unknown bit depth and colour type), no pixels,
// or more than kMaxImagePixels.
ImageHeader read_png_header(const uint8_t* bytes, size_t size, const std::string& what);

// Decodes to the bytes of Pillow's Image.open(...).convert("RGB") (channels 3) or
// .convert("L") (channels 1): 16-bit samples keep their high byte, except in greyscale images,
// which Pillow opens as 32-bit integers and converting clips at 255.
Image decode_png(const uint8_t* bytes, size_t size, int channels, const std::string& what);

}  // namespace rddp::data
