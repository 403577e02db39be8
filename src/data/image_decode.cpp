// Which decoder reads an image, chosen by its first bytes as Pillow chooses: each follows
// Pillow 9's reader for its format, so that every image has the bytes torchvision's loader
// gives it.
#include "resnet_ddp/data/image_decode.h"

#include <algorithm>
#include <cctype>

#include "bmp_decode.h"
#include "jpeg_decode.h"
#include "png_decode.h"
#include "pnm_decode.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

std::string lowercase_extension(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string extension = path.substr(dot);
  for (char& c : extension) c = char(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

}  // namespace

bool has_decodable_extension(const std::string& path) {
  static const char* const kDecodable[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm"};
  const std::string extension = lowercase_extension(path);
  return std::any_of(std::begin(kDecodable), std::end(kDecodable),
                     [&](const char* known) { return extension == known; });
}

bool has_undecodable_image_extension(const std::string& path) {
  const std::string extension = lowercase_extension(path);
  return extension == ".tif" || extension == ".tiff" || extension == ".webp";
}

void check_image_size(int64_t width, int64_t height, const std::string& what) {
  if (width <= 0 || height <= 0)
    refuse_image(what, "its header says " + std::to_string(width) + "x" + std::to_string(height) +
                           " pixels, which is no image");
  // Each side alone first: a PGM header's ten-digit sides would overflow the product.
  if (width > kMaxImagePixels || height > kMaxImagePixels || width * height > kMaxImagePixels)
    fail("image ", what, " is ", width, "x", height, " pixels, more than the ", kMaxImagePixels,
         " that Pillow, and so torchvision, read (a decompression bomb, or a damaged header); "
         "shrink the image, or remove it");
}

void refuse_image(const std::string& what, const std::string& why, const std::string& fix) {
  fail("cannot decode image ", what, ": ", why, "; ", fix);
}

namespace {

[[noreturn]] void refuse_unknown_format(const std::string& what) {
  fail("cannot decode image ", what, ": its first bytes are those of no JPEG, PNG, BMP, PGM or "
       "PPM file. The file is damaged or not an image of the format its name says; replace or "
       "remove it");
}

}  // namespace

ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& what) {
  if (looks_like_jpeg(bytes, size)) return read_jpeg_header(bytes, size, what);
  if (looks_like_png(bytes, size)) return read_png_header(bytes, size, what);
  if (looks_like_pnm(bytes, size)) return read_pnm_header(bytes, size, what);
  if (looks_like_bmp(bytes, size)) return read_bmp_header(bytes, size, what);
  refuse_unknown_format(what);
}

Image decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& what) {
  if (channels != 1 && channels != 3)
    fail("cannot decode ", what, " to ", channels, " channels: only 1 (greyscale) or 3 (RGB)");
  if (looks_like_jpeg(bytes, size)) return decode_jpeg(bytes, size, channels, what);
  if (looks_like_png(bytes, size)) return decode_png(bytes, size, channels, what);
  if (looks_like_pnm(bytes, size)) return decode_pnm(bytes, size, channels, what);
  if (looks_like_bmp(bytes, size)) return decode_bmp(bytes, size, channels, what);
  refuse_unknown_format(what);
}

Image decode_image_crop(const uint8_t* bytes, size_t size, int channels,
                        const ChooseCrop& choose, const std::string& what) {
  if (channels != 1 && channels != 3)
    fail("cannot decode ", what, " to ", channels, " channels: only 1 (greyscale) or 3 (RGB)");
  if (looks_like_jpeg(bytes, size)) return decode_jpeg(bytes, size, channels, what, &choose);
  const Image whole = decode_image(bytes, size, channels, what);
  return crop(whole, choose(whole.height, whole.width));
}

Image decode_image_file(const std::string& path, int channels) {
  const std::vector<uint8_t> bytes = read_image_file(path);
  return decode_image(bytes.data(), bytes.size(), channels, printable(path));
}

std::vector<uint8_t> read_image_file(const std::string& path) {
  return read_file(path, kMaxImageFileBytes,
                   "that an image of at most 178,956,970 pixels (Pillow's limit) can take");
}

}  // namespace rddp::data
