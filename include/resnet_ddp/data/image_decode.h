#pragma once
// Decoding image files (JPEG, PNG, BMP, PGM, PPM) with stb_image.
#include <cstddef>
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

// Pillow's limit (2 x Image.MAX_IMAGE_PIXELS): torchvision's loader refuses an image of more
// pixels as a decompression bomb, and so do these functions.
inline constexpr int64_t kMaxImagePixels = 178956970;

struct ImageHeader {
  int width = 0;
  int height = 0;
  int channels = 0;  // as stored
};

// An image's size, read from its header without decoding it. Throws Error naming `what` when
// the data is no image stb_image reads, or has no pixels or more than kMaxImagePixels.
ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& what);

// Decodes to `channels` channels (3: RGB, greyscale repeated; 1: greyscale, RGB converted
// with stb_image's weights (77 R + 150 G + 29 B) / 256, which differ from PIL's "L" mode by
// at most a level or so). `what` names the data in error messages.
Image decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& what);
Image decode_image_file(const std::string& path, int channels);

// True for the extensions torchvision's ImageFolder accepts and stb_image decodes.
bool has_decodable_extension(const std::string& path);
// True for the extensions torchvision's ImageFolder accepts that stb_image cannot decode.
bool has_undecodable_image_extension(const std::string& path);

}  // namespace rddp::data
