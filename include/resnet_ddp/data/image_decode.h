#pragma once
// Decoding image files as torchvision's loader does: JPEGs with libjpeg-turbo (Pillow's own
// decoder), PNG with zlib, BMP, PGM and PPM, each by Pillow's rules (src/data/*_decode.h);
// colour conversions as Pillow's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

// Pillow's limit (2 x Image.MAX_IMAGE_PIXELS): torchvision's loader refuses an image of more
// pixels as a decompression bomb, and so do these functions.
inline constexpr int64_t kMaxImagePixels = 178956970;

// Throws Error naming `what` when a header's width x height is no image (a side of 0) or more
// than kMaxImagePixels pixels. Every decoder checks its header's size with it.
void check_image_size(int64_t width, int64_t height, const std::string& what);

// Throws Error "cannot decode image WHAT: WHY; FIX", by default a damaged file's fix.
[[noreturn]] void refuse_image(const std::string& what, const std::string& why,
                               const std::string& fix = "the file is damaged: replace or remove it");

struct ImageHeader {
  int width = 0;
  int height = 0;
  int channels = 0;  // as stored
};

// An image's size, read from its header without decoding it. Throws Error naming `what` when
// the data is no image we read, or has no pixels or more than kMaxImagePixels.
ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& what);

// Decodes to `channels` channels, to the bytes of Pillow's Image.open(...).convert("RGB")
// (channels 3) or .convert("L") (channels 1): alpha dropped, grey repeated, colour to grey and
// CMYK to RGB with Pillow's integer formulas (pillow_colour.h). `what` names the data in error
// messages.
Image decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& what);
Image decode_image_file(const std::string& path, int channels);

// An image file's bytes (read_file), refused when larger than any image of kMaxImagePixels
// pixels can be (2 GiB; a 16-bit RGBA PNG stored uncompressed needs 1.44 GB).
inline constexpr uint64_t kMaxImageFileBytes = uint64_t(1) << 31;
std::vector<uint8_t> read_image_file(const std::string& path);

// The region `choose` picks (inside the image) from the size in the image's header, of what
// decode_image gives, byte for byte. A JPEG decodes only what the region needs
// (jpeg_decode.h): for RandomResizedCrop's regions of ImageNet-like photos, about a quarter more
// images a second. The header is read once, for the size and for the decode.
Image decode_image_crop(const uint8_t* bytes, size_t size, int channels,
                        const ChooseCrop& choose, const std::string& what);

// The libjpeg JPEGs decode with, e.g. "libjpeg-turbo 2.1.5 (libjpeg API 62)".
std::string jpeg_library_version();

// True for the extensions torchvision's ImageFolder accepts and we decode.
bool has_decodable_extension(const std::string& path);
// True for the extensions torchvision's ImageFolder accepts that we cannot decode.
bool has_undecodable_image_extension(const std::string& path);

}  // namespace rddp::data
