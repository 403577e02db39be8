// The one translation unit that compiles stb_image.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO          // we read files ourselves, for messages that name them
// Only the formats resnet_ddp reads (has_decodable_extension): stb_image would otherwise
// decode any file whose bytes are a GIF, PSD, TGA, HDR or PIC image, whatever its name says,
// through decoders that no test of ours covers.
// JPEGs go to libjpeg instead (jpeg_decode.h), PGM and PPM to pnm_decode.h, BMP to
// bmp_decode.h.
#define STBI_ONLY_PNG
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

#include "bmp_decode.h"
#include "jpeg_decode.h"
#include "pnm_decode.h"
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

// Pillow opens a 16-bit greyscale PNG as 32-bit integers (mode "I"), and Image.convert clips
// those at 255 to make "L" or "RGB" rather than scaling them: torchvision's loader sees such an
// image nearly white, and so must training here. Pillow reads every other 16-bit PNG as its
// samples' high bytes, as stb_image does.
bool is_16_bit_grey_png(const uint8_t* bytes, size_t size) {
  // The signature, then IHDR, which must come first: length, type, width, height, bit depth,
  // colour type (0 is greyscale without alpha).
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return size >= 26 && std::equal(kSignature, kSignature + 8, bytes) &&
         std::equal(bytes + 12, bytes + 16, "IHDR") && bytes[24] == 16 && bytes[25] == 0;
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
  // Each side alone first: a PGM header's ten-digit sides would overflow the product.
  if (width > kMaxImagePixels || height > kMaxImagePixels || width * height > kMaxImagePixels)
    fail("image ", what, " is ", width, "x", height, " pixels, more than the ", kMaxImagePixels,
         " that Pillow, and so torchvision, read (a decompression bomb, or a damaged header); "
         "shrink the image, or remove it");
}

ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& what) {
  if (looks_like_jpeg(bytes, size)) return read_jpeg_header(bytes, size, what);
  if (looks_like_pnm(bytes, size)) return read_pnm_header(bytes, size, what);
  if (looks_like_bmp(bytes, size)) return read_bmp_header(bytes, size, what);
  if (size > size_t(INT_MAX)) fail(what, " is larger than 2 GiB, which stb_image cannot decode");
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
  if (looks_like_pnm(bytes, size)) return decode_pnm(bytes, size, channels, what);
  if (looks_like_bmp(bytes, size)) return decode_bmp(bytes, size, channels, what);
  // The header first: a damaged one must not make stb_image corrupt memory or allocate
  // gigabytes.
  const ImageHeader header = read_image_header(bytes, size, what);
  const bool wide_grey = is_16_bit_grey_png(bytes, size);
  // Colour to grey is Pillow's conversion, not stb_image's (other weights): ask for RGB.
  const bool to_grey = channels == 1 && header.channels >= 3;
  const int requested = wide_grey ? 1 : to_grey ? 3 : channels;
  int width = 0, height = 0, stored_channels = 0;
  std::unique_ptr<void, void (*)(void*)> pixels(
      wide_grey ? static_cast<void*>(stbi_load_16_from_memory(bytes, int(size), &width, &height,
                                                              &stored_channels, requested))
                : static_cast<void*>(stbi_load_from_memory(bytes, int(size), &width, &height,
                                                           &stored_channels, requested)),
      &stbi_image_free);
  if (!pixels)
    fail("cannot decode image ", what, ": ", stbi_failure_reason(),
         ". The file is damaged or not an image of the format its name says; replace or "
         "remove it");
  if (width != header.width || height != header.height)
    fail("cannot decode image ", what, ": its header says ", header.width, "x", header.height,
         " pixels but it decodes to ", width, "x", height, "; the file is damaged: replace or "
         "remove it");
  Image image(height, width, channels);
  const size_t count = size_t(height) * width;
  if (wide_grey) {
    const auto* samples = static_cast<const uint16_t*>(pixels.get());
    for (size_t i = 0; i < count; ++i)
      std::fill_n(image.pixels.data() + i * channels, channels,
                  static_cast<uint8_t>(std::min<uint16_t>(samples[i], 255)));
  } else if (to_grey) {
    pillow_rgb_to_grey(static_cast<const uint8_t*>(pixels.get()), count, image.pixels.data());
  } else {
    const auto* bytes_out = static_cast<const uint8_t*>(pixels.get());
    std::copy(bytes_out, bytes_out + count * channels, image.pixels.begin());
  }
  return image;
}

Image decode_image_file(const std::string& path, int channels) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_image(bytes.data(), bytes.size(), channels, path);
}

}  // namespace rddp::data
