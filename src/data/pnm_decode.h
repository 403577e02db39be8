#pragma once
// Decoding PGM and PPM files (and the PBM bitmaps Pillow reads under any name) as Pillow 9's
// PpmImagePlugin does, which stb_image does not: Pillow scales samples of any maximum value
// other than 255 to 0..255 (round half to even), reads 16-bit samples big-endian, opens a
// 16-bit PGM as 32-bit integers that converting to "L" or "RGB" clips at 255, and reads the
// plain (ASCII) variants P1, P2 and P3 too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/image_decode.h"

namespace rddp::data {

// True when `bytes` start with one of the magic numbers P1 to P6 and a whitespace byte.
bool looks_like_pnm(const uint8_t* bytes, size_t size);

// The size and stored channel count (1 for bitmaps and greymaps, 3 for pixmaps) from the
// header. Throws Error naming `what` for a header Pillow refuses, one whose numbers are not
// plain decimals, no pixels, or more than kMaxImagePixels.
ImageHeader read_pnm_header(const uint8_t* bytes, size_t size, const std::string& what);

// Decodes to the bytes of Pillow's Image.open(...).convert("RGB") (channels 3) or
// .convert("L") (channels 1). Refuses, naming `what`, pixel data shorter than the header says
// and plain samples above the maximum value, as Pillow refuses them.
Image decode_pnm(const uint8_t* bytes, size_t size, int channels, const std::string& what);

}  // namespace rddp::data
