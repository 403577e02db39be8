#pragma once
// Decoding image files (JPEG, PNG, BMP, PGM, PPM) with stb_image.
#include <cstddef>
#include <cstdint>
#include <string>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

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
