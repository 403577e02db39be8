// The one translation unit that compiles stb_image.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO          // we read files ourselves, for messages that name them
// Only the formats resnet_ddp reads (has_decodable_extension): stb_image would otherwise
// decode any file whose bytes are a GIF, PSD, TGA, HDR or PIC image, whatever its name says,
// through decoders that no test of ours covers.
// JPEGs go to libjpeg instead (jpeg_decode.h).
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_PNM
// Zeroed allocations: should stb_image read memory it never wrote (as 2.27 did with the Huffman
// tables a damaged JPEG names but never defines), it reads zeros, not the heap's leftovers.
#define STBI_MALLOC(size) std::calloc(1, size)
#define STBI_REALLOC(pointer, size) std::realloc(pointer, size)
#define STBI_FREE(pointer) std::free(pointer)
#include <cstdlib>
#include <stb_image.h>

#include "resnet_ddp/data/image_decode.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <memory>

#include "jpeg_decode.h"
#include "stb_image_guard.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/pillow_colour.h"
#include "resnet_ddp/error.h"

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

void refuse_oversized_image(int64_t width, int64_t height, const std::string& what) {
  if (width * height > kMaxImagePixels)
    fail("image ", what, " is ", width, "x", height, " pixels, more than the ", kMaxImagePixels,
         " that Pillow, and so torchvision, read (a decompression bomb, or a damaged header); "
         "shrink the image, or remove it");
}

ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& what) {
  if (looks_like_jpeg(bytes, size)) return read_jpeg_header(bytes, size, what);
  if (size > size_t(INT_MAX)) fail(what, " is larger than 2 GiB, which stb_image cannot decode");
  if (const char* hazard = stb_image_hazard(bytes, size))
    fail("cannot decode image ", what, ": ", hazard, ". The file is damaged; replace or remove it");
  ImageHeader header;
  if (!stbi_info_from_memory(bytes, int(size), &header.width, &header.height, &header.channels))
    fail("cannot decode image ", what, ": ", stbi_failure_reason(),
         ". The file is damaged or not an image of the format its name says; replace or "
         "remove it");
  // stb_image reads a PGM/PPM header without a size as a 0x0 image.
  if (header.width <= 0 || header.height <= 0)
    fail("cannot decode image ", what, ": its header says ", header.width, "x", header.height,
         " pixels, which is no image; the file is damaged: replace or remove it");
  refuse_oversized_image(header.width, header.height, what);
  return header;
}

Image decode_image(const uint8_t* bytes, size_t size, int channels, const std::string& what) {
  if (channels != 1 && channels != 3)
    fail("cannot decode ", what, " to ", channels, " channels: only 1 (greyscale) or 3 (RGB)");
  if (looks_like_jpeg(bytes, size)) return decode_jpeg(bytes, size, channels, what);
  // The header first: a damaged one must not make stb_image corrupt memory or allocate
  // gigabytes.
  const ImageHeader header = read_image_header(bytes, size, what);
  // Colour to grey is Pillow's conversion, not stb_image's (other weights): ask for RGB.
  const bool to_grey = channels == 1 && header.channels >= 3;
  const int requested = to_grey ? 3 : channels;
  int width = 0, height = 0, stored_channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes, int(size), &width, &height, &stored_channels, requested),
      &stbi_image_free);
  if (!pixels)
    fail("cannot decode image ", what, ": ", stbi_failure_reason(),
         ". The file is damaged or not an image of the format its name says; replace or "
         "remove it");
  if (width != header.width || height != header.height)
    fail("cannot decode image ", what, ": its header says ", header.width, "x", header.height,
         " pixels but it decodes to ", width, "x", height, "; the file is damaged: replace or "
         "remove it");
  Image image;
  image.height = height;
  image.width = width;
  image.channels = channels;
  const size_t count = size_t(height) * width;
  if (to_grey) {
    image.pixels.resize(count);
    pillow_rgb_to_grey(pixels.get(), count, image.pixels.data());
  } else {
    image.pixels.assign(pixels.get(), pixels.get() + count * channels);
  }
  return image;
}

Image decode_image_file(const std::string& path, int channels) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_image(bytes.data(), bytes.size(), channels, path);
}

}  // namespace rddp::data
