#pragma once
// Decoding BMP files as Pillow 9's BmpImagePlugin does, which stb_image does not: stb_image
// refuses top-down files (a negative height) and run-length encoded ones (RLE8, RLE4), and
// widens 5- and 6-bit samples by repeating bits where Pillow computes v * 255 / 31 (or 63),
// one level off for about half the values. Pillow's rules kept here: the header sizes and bit
// depths it reads, the bitfield layouts it knows, the palette offset it repairs, palette
// entries past the file's palette reading as grey (i, i, i), and its run-length decoder's ways.
#include <cstddef>
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/image_decode.h"

namespace rddp::data {

// True when `bytes` start with "BM".
bool looks_like_bmp(const uint8_t* bytes, size_t size);

// The size and stored channel count (1 for palette images, 3 otherwise) from the headers.
// Throws Error naming `what` for a header Pillow refuses, no pixels, or more than
// kMaxImagePixels.
ImageHeader read_bmp_header(const uint8_t* bytes, size_t size, const std::string& what);

// Decodes to the bytes of Pillow's Image.open(...).convert("RGB") (channels 3) or
// .convert("L") (channels 1). Refuses, naming `what`, pixel data shorter than the image.
Image decode_bmp(const uint8_t* bytes, size_t size, int channels, const std::string& what);

}  // namespace rddp::data
