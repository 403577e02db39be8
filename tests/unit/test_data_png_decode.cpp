// PNG files decode, or are refused, as Pillow 9 decodes or refuses them. The expected outcomes
// are Pillow's for the same bytes (each was checked against it); the full comparison with
// Pillow itself, interlaced and random damage included, is parity.test_decode_parity.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/data/image_decode.h"
#include "support/image_bytes.h"
#include "resnet_ddp/error.h"

using namespace rddp;

namespace {

using Bytes = std::vector<uint8_t>;

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

std::string chunk(const std::string& type, const std::string& data) {
  std::string out;
  put_be32(out, uint32_t(data.size()));
  const std::string body = type + data;
  out += body;
  put_be32(out, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
  return out;
}

std::string zlib_of(const std::string& raw) {
  uLongf size = compressBound(uLong(raw.size()));
  std::string out(size, '\0');
  REQUIRE(compress(reinterpret_cast<Bytef*>(out.data()), &size,
                   reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size())) == Z_OK);
  out.resize(size);
  return out;
}

std::string header(uint32_t width, uint32_t height, int depth, int colour_type) {
  std::string data;
  put_be32(data, width);
  put_be32(data, height);
  data += std::string{char(depth), char(colour_type), 0, 0, 0};
  return "\x89PNG\r\n\x1a\n" + chunk("IHDR", data);
}

const std::string kEnd = chunk("IEND", "");

// A 2x2 RGB image: rows of filter byte 0 and the pixels.
const std::string kRows = std::string("\0\x0a\x14\x1e\x28\x32\x3c", 7) +
                          std::string("\0\x46\x50\x5a\x64\x6e\x78", 7);
const Bytes kPixels = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};

data::Image decode(const std::string& file, int channels = 3) {
  return test::decode_bytes(file, channels, "test.png");
}

std::string error_of(const std::string& file) { return test::decode_error(file, "test.png"); }

}  // namespace

TEST_CASE("PNG: what follows the image data does not matter, as in Pillow") {
  const std::string image = header(2, 2, 8, 2) + chunk("IDAT", zlib_of(kRows));
  CHECK(decode(image + kEnd).pixels == kPixels);
  CHECK(decode(image).pixels == kPixels);  // no IEND
  CHECK(decode(image + chunk("tEXt", "a").substr(0, 9)).pixels == kPixels);
}

TEST_CASE("PNG CRCs: checked before the image data, not in it or after it") {
  std::string bad_text = chunk("tEXt", "a");
  bad_text.back() ^= 1;
  const std::string data = chunk("IDAT", zlib_of(kRows));
  CHECK(error_of(header(2, 2, 8, 2) + bad_text + data + kEnd)
            .find("tEXt chunk fails its CRC check") != std::string::npos);
  std::string bad_data = data;
  bad_data.back() ^= 1;
  CHECK(decode(header(2, 2, 8, 2) + bad_data + kEnd).pixels == kPixels);
  CHECK(decode(header(2, 2, 8, 2) + data + bad_text + kEnd).pixels == kPixels);
}

TEST_CASE("PNG image data: zlib's Adler-32 and the filter types are checked; a cut is refused") {
  std::string stream = zlib_of(kRows);
  stream.back() ^= 1;
  CHECK(error_of(header(2, 2, 8, 2) + chunk("IDAT", stream) + kEnd).find("incorrect data check") !=
        std::string::npos);
  std::string rows = kRows;
  rows[7] = 5;
  CHECK(error_of(header(2, 2, 8, 2) + chunk("IDAT", zlib_of(rows)) + kEnd)
            .find("filter type 5") != std::string::npos);
  const std::string whole = header(2, 2, 8, 2) + chunk("IDAT", zlib_of(kRows)) + kEnd;
  CHECK(error_of(whole.substr(0, whole.size() - 24)).find("truncated") != std::string::npos);
  CHECK(error_of(whole.substr(0, 20)).find("test.png") != std::string::npos);
}

TEST_CASE("PNG palettes: indices past PLTE read as grey; 16-bit grey clips at 255") {
  // Two colours; indices 0, 1, 7, 200.
  const std::string palette = chunk("PLTE", std::string("\x01\x02\x03\x04\x05\x06", 6));
  const std::string rows = std::string("\0\x00\x01", 3) + std::string("\0\x07\xc8", 3);
  const std::string file = header(2, 2, 8, 3) + palette + chunk("IDAT", zlib_of(rows)) + kEnd;
  CHECK(decode(file).pixels == Bytes{1, 2, 3, 4, 5, 6, 7, 7, 7, 200, 200, 200});
  // Samples 200, 255, 256, 4660 (0x1234): Pillow's mode "I", clipped when converted.
  const std::string wide = std::string("\0\x00\xc8\x00\xff", 5) + std::string("\0\x01\x00\x12\x34", 5);
  CHECK(decode(header(2, 2, 16, 0) + chunk("IDAT", zlib_of(wide)) + kEnd, 1).pixels ==
        Bytes{200, 255, 255, 255});
}

TEST_CASE("PNG headers: size and stored channels; pairs Pillow does not read are refused") {
  const std::string file = header(7, 5, 16, 6) + chunk("IDAT", "") + kEnd;
  const data::ImageHeader info = data::read_image_header(
      reinterpret_cast<const uint8_t*>(file.data()), file.size(), "test.png");
  CHECK(info.width == 7);
  CHECK(info.height == 5);
  CHECK(info.channels == 4);
  CHECK(error_of(header(2, 2, 3, 0) + chunk("IDAT", zlib_of(kRows)) + kEnd)
            .find("bit depth and colour type") != std::string::npos);
  CHECK(error_of(header(2, 2, 8, 2) + kEnd).find("before any image data") != std::string::npos);
}
