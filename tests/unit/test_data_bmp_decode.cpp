// BMP files decode to Pillow's bytes: the expected values below are worked out from Pillow 9's
// BmpImagePlugin rules and were checked against it. The full comparison with Pillow itself,
// over every depth, header, bitfield layout and random run-length streams, is
// parity.test_decode_parity.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/data/image_decode.h"
#include "support/image_bytes.h"
#include "resnet_ddp/error.h"

using namespace rddp;

namespace {

using Bytes = std::vector<uint8_t>;

void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put16(std::string& out, uint32_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// A BMP with a 40-byte header; a negative height stores rows top down.
std::string bmp(int32_t width, int32_t height, int bits, const std::string& data,
                uint32_t compression = 0, const std::string& after_header = "") {
  std::string info;
  put32(info, 40);
  put32(info, uint32_t(width));
  put32(info, uint32_t(height));
  put16(info, 1);
  put16(info, uint32_t(bits));
  put32(info, compression);
  put32(info, uint32_t(data.size()));
  put32(info, 2835);
  put32(info, 2835);
  put32(info, bits <= 8 ? uint32_t(after_header.size() / 4) : 0);
  put32(info, 0);
  std::string file = "BM";
  const uint32_t start = uint32_t(14 + info.size() + after_header.size());
  put32(file, uint32_t(start + data.size()));
  put32(file, 0);
  put32(file, start);
  return file + info + after_header + data;
}

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// 256 entries, index i stored as B = i, G = 2i, R = 3i (mod 256).
std::string test_palette() {
  std::string palette;
  for (int i = 0; i < 256; ++i) palette += bytes({i, (2 * i) & 255, (3 * i) & 255, 0});
  return palette;
}

Bytes rgb_of_indices(std::initializer_list<int> indices) {
  Bytes out;
  for (int i : indices)
    out.insert(out.end(), {uint8_t((3 * i) & 255), uint8_t((2 * i) & 255), uint8_t(i)});
  return out;
}

data::Image decode(const std::string& file, int channels) {
  return test::decode_bytes(file, channels, "test.bmp");
}

std::string error_of(const std::string& file) { return test::decode_error(file, "test.bmp"); }

}  // namespace

TEST_CASE("BMP rows: bottom up by default, top down for a negative height") {
  const std::string rows = bytes({1, 2, 3, 0, 4, 5, 6, 0});  // one BGR pixel and padding each
  CHECK(decode(bmp(1, 2, 24, rows), 3).pixels == Bytes{6, 5, 4, 3, 2, 1});
  CHECK(decode(bmp(1, -2, 24, rows), 3).pixels == Bytes{3, 2, 1, 6, 5, 4});
  // The last row's padding may be missing, as Pillow allows; a byte of its pixels may not.
  CHECK(decode(bmp(1, 2, 24, rows.substr(0, 7)), 3).pixels == Bytes{6, 5, 4, 3, 2, 1});
  CHECK(error_of(bmp(1, 2, 24, rows.substr(0, 6))).find("truncated") != std::string::npos);
}

TEST_CASE("16-bit BMP samples widen as v * 255 / 31 (or 63), truncated, not by repeating bits") {
  // 5-bit 16: 16 * 255 / 31 = 131 (bit repetition would give 132); 6-bit 32: 129.
  const std::string five = bmp(1, 1, 16, bytes({0x10, 0x42, 0, 0}));  // 0x4210
  CHECK(decode(five, 3).pixels == Bytes{131, 131, 131});
  std::string masks;
  for (uint32_t mask : {0xF800u, 0x7E0u, 0x1Fu}) put32(masks, mask);
  const std::string six = bmp(1, 1, 16, bytes({0x10, 0x84, 0, 0}), 3, masks);  // 0x8410
  CHECK(decode(six, 3).pixels == Bytes{131, 129, 131});
}

TEST_CASE("RLE8: runs, absolute runs padded to an even file position, end of line, end") {
  // Width 4, height 2, bottom row first. The data starts at 14 + 40 + 1024 = 1078 (even):
  // a run of two 5s, end of line, an absolute run 7 8 9 (then one byte of padding, as the
  // file position is odd), a run of one 4, end of bitmap.
  const std::string stream = bytes({2, 5, 0, 0, 0, 3, 7, 8, 9, 0, 1, 4, 0, 1});
  const data::Image image = decode(bmp(4, 2, 8, stream, 1, test_palette()), 3);
  CHECK(image.pixels == rgb_of_indices({7, 8, 9, 4, 5, 5, 0, 0}));
}

TEST_CASE("RLE8 delta: Pillow 9 takes its offsets from the second pair of bytes") {
  // 0 2 then 9 9 (read and passed over) then 2 0: two pixels right; a run of two 6s; end of
  // line; a row of four 1s.
  const std::string stream = bytes({0, 2, 9, 9, 2, 0, 2, 6, 0, 0, 4, 1});
  const data::Image image = decode(bmp(4, 2, 8, stream, 1, test_palette()), 3);
  CHECK(image.pixels == rgb_of_indices({1, 1, 1, 1, 0, 0, 6, 6}));
  // Fewer pixels than the image holds is refused, as Pillow refuses it.
  CHECK(error_of(bmp(4, 2, 8, bytes({2, 6, 0, 1}), 1, test_palette())).find("fewer pixels") !=
        std::string::npos);
}

TEST_CASE("palette BMPs: indices past the file's palette read as grey; grey via the colours") {
  // Two colours in the file, 4-bit indices 0, 1, 9: entry 9 is (9, 9, 9).
  const std::string palette = bytes({10, 20, 30, 0, 40, 50, 60, 0});
  const std::string file = bmp(3, 1, 4, bytes({0x01, 0x90, 0, 0}), 0, palette);
  CHECK(decode(file, 3).pixels == Bytes{30, 20, 10, 60, 50, 40, 9, 9, 9});
  // (19595 * 30 + 38470 * 20 + 7471 * 10 + 2^15) >> 16 = 22, and 52 for the second colour.
  CHECK(decode(file, 1).pixels == Bytes{22, 52, 9});
}

TEST_CASE("BMPs Pillow does not read are refused, naming the file and the reason") {
  CHECK(error_of(bmp(2, 2, 24, std::string(16, '\0'), 4)).find("compression is 4") !=
        std::string::npos);
  CHECK(error_of(bmp(2, 2, 2, std::string(8, '\0'))).find("2 bits") != std::string::npos);
  std::string wrong_masks;
  for (uint32_t mask : {0xFFu, 0xFF00u, 0xFF0000u}) put32(wrong_masks, mask);
  CHECK(error_of(bmp(2, 2, 32, std::string(16, '\0'), 3, wrong_masks)).find("bitfields") !=
        std::string::npos);
  std::string odd_header = bmp(1, 1, 24, bytes({1, 2, 3, 0}));
  odd_header[14] = 52;
  CHECK(error_of(odd_header).find("52 bytes long") != std::string::npos);
  CHECK(error_of(bmp(0, 1, 24, "")).find("0x1 pixels") != std::string::npos);
  CHECK(error_of(bmp(1, 1, 24, "")).find("test.bmp") != std::string::npos);
}

TEST_CASE("the BMP header alone gives the size, and 1 channel for palette images") {
  const std::string file = bmp(5, -3, 8, "", 0, test_palette());
  const data::ImageHeader header = data::read_image_header(
      reinterpret_cast<const uint8_t*>(file.data()), file.size(), "test.bmp");
  CHECK(header.width == 5);
  CHECK(header.height == 3);
  CHECK(header.channels == 1);
}
