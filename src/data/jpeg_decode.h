#pragma once
// Decoding JPEG files with libjpeg(-turbo), the library Pillow decodes them with: with the same
// settings (the library's defaults: accurate integer IDCT, smooth chroma upsampling) the pixels
// are Pillow's to the byte, which stb_image's own decoder is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/image_decode.h"

namespace rddp::data {

// True when `bytes` start as a JPEG does (SOI marker): the data this decoder is for.
bool looks_like_jpeg(const uint8_t* bytes, size_t size);

// The size and stored channel count (1, 3 or 4) from the frame header, without decoding.
// Throws Error naming `what` when libjpeg refuses the data or the image is larger than
// kMaxImagePixels.
ImageHeader read_jpeg_header(const uint8_t* bytes, size_t size, const std::string& what);

// Decodes as Pillow's Image.open(...).convert("RGB") (channels 3) or .convert("L") (channels
// 1; no other count: decode_image checks) does, CMYK and YCCK images included. A file that ends before its image data does is
// refused, as Pillow refuses it; damage libjpeg only warns about otherwise decodes as Pillow
// decodes it.
// With `choose`, only the region it picks (inside the image) from the header's size: the bytes
// of decoding the whole image and cropping, from libjpeg-turbo's cropped decoding where that is
// exact (greyscale, 4:4:4, 4:2:2, 4:2:0, not progressive), which skips the inverse DCT and
// colour conversion of what lies outside.
Image decode_jpeg(const uint8_t* bytes, size_t size, int channels, const std::string& what,
                  const ChooseCrop* choose = nullptr);

}  // namespace rddp::data
