// PGM, PPM and PBM data decode to Pillow's bytes. The expected values are Pillow 9.4's
// (Image.open(...).convert(...)) for the same bytes, worked out from its PpmImagePlugin rules:
// scaling with Python's round() (half to even), 16-bit greymaps clipped at 255, and checked
// there. Damaged files are refused where Pillow refuses them; plain files cut short or with
// negative samples Pillow decodes into made-up values, and those are refused here too. The full
// comparison with Pillow itself is parity.test_decode_parity.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "resnet_ddp/data/image_decode.h"
#include "support/image_bytes.h"
#include "resnet_ddp/error.h"

using namespace rddp;

namespace {

using Bytes = std::vector<uint8_t>;

data::Image decode(const std::string& file, int channels) {
  return test::decode_bytes(file, channels, "test.pgm");
}

std::string error_of(const std::string& file) { return test::decode_error(file, "test.pgm"); }

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

}  // namespace

TEST_CASE("PGM: 8-bit samples as they are, other maximum values scaled half to even") {
  CHECK(decode("P5 3 1 255\n" + bytes({0, 7, 255}), 1).pixels == Bytes{0, 7, 255});
  // 1/6 * 255 = 42.5 -> 42 and 5/6 * 255 = 212.5 -> 212 (even), 3/6 * 255 = 127.5 -> 128;
  // away from zero would give 43 and 213.
  CHECK(decode("P5 4 1 6\n" + bytes({1, 3, 5, 6}), 1).pixels == Bytes{42, 128, 212, 255});
  // A sample above the maximum value is clipped, as Pillow's min(out_max, ...).
  CHECK(decode("P5 2 1 6\n" + bytes({9, 0}), 1).pixels == Bytes{255, 0});
  // Repeated for RGB.
  CHECK(decode("P5 2 1 1\n" + bytes({1, 0}), 3).pixels == Bytes{255, 255, 255, 0, 0, 0});
}

TEST_CASE("16-bit PGM is Pillow's mode I: scaled to 0..65535, then clipped at 255") {
  // Maximum 1000: 0 -> 0, 1 -> round(65.535) = 66, 3 -> round(196.605) = 197, 4 -> 262 -> 255.
  const std::string file = "P5\n4 1\n1000\n" + bytes({0, 0, 0, 1, 0, 3, 0, 4});
  CHECK(decode(file, 1).pixels == Bytes{0, 66, 197, 255});
  // Maximum 65535 is read as it is: 200 stays, 256 clips.
  CHECK(decode("P5\n2 1\n65535\n" + bytes({0, 200, 1, 0}), 1).pixels == Bytes{200, 255});
}

TEST_CASE("16-bit PPM is scaled to 0..255, big-endian; colour to grey is Pillow's") {
  // Maximum 1000: 1000 -> 255, 500 -> 127.5 -> 128, 2 -> 0.51 -> 1.
  const std::string file = "P6\n1 1\n1000\n" + bytes({0x03, 0xE8, 0x01, 0xF4, 0x00, 0x02});
  CHECK(decode(file, 3).pixels == Bytes{255, 128, 1});
  // (19595 * 255 + 38470 * 128 + 7471 * 1 + 32768) >> 16 = 151.
  CHECK(decode(file, 1).pixels == Bytes{151});
}

TEST_CASE("PBM bitmaps: rows of whole bytes, 1 is black; plain ones need no spaces") {
  // 10 pixels a row: two bytes, the last 6 bits padding.
  const std::string binary = "P4\n10 2\n" + bytes({0b10100000, 0b01000000, 0b00000000,
                                                   0b11000000});
  CHECK(decode(binary, 1).pixels == Bytes{0, 255, 0, 255, 255, 255, 255, 255, 255, 0,
                                          255, 255, 255, 255, 255, 255, 255, 255, 0, 0});
  CHECK(decode("P1\n3 2\n101 # a comment\n0\n11", 1).pixels == Bytes{0, 255, 0, 255, 0, 0});
  CHECK(error_of("P1\n2 1\n12").find("'2', where only 0 and 1 belong") != std::string::npos);
  CHECK(error_of("P4\n10 2\n" + bytes({0, 0, 0})).find("truncated") != std::string::npos);
}

TEST_CASE("plain PGM and PPM: decimal samples, comments anywhere, scaled as binary ones") {
  CHECK(decode("P2\n# made by hand\n3 1\n6\n1 3#six\n 5", 1).pixels == Bytes{42, 128, 212});
  CHECK(decode("P3 1 1 255 10 20 30", 3).pixels == Bytes{10, 20, 30});
  // A 16-bit plain PGM: 300 of 65535 is 300, clipped.
  CHECK(decode("P2 2 1 65535 300 17", 1).pixels == Bytes{255, 17});
  CHECK(error_of("P2 2 1 6 1 7").find("the sample 7, above the header's maximum value 6") !=
        std::string::npos);
  CHECK(error_of("P2 2 1 6 1").find("truncated") != std::string::npos);
  CHECK(error_of("P2 1 1 6 01234567890").find("longer than 10 digits") != std::string::npos);
  CHECK(error_of("P2 1 1 6 -1").find("'-1' where its sample belongs") != std::string::npos);
}

TEST_CASE("PGM/PPM headers Pillow refuses are refused, naming the file") {
  for (const char* maximum : {"0", "65536"})
    CHECK(error_of(std::string("P5 1 1 ") + maximum + "\n\x01\x01")
              .find("maximum value is " + std::string(maximum)) != std::string::npos);
  CHECK(error_of("P6 0 4 255\n").find("0x4 pixels, which is no image") != std::string::npos);
  CHECK(error_of("P6 x 4 255\n").find("'x' where its width belongs") != std::string::npos);
  CHECK(error_of("P6 4").find("header ends before") != std::string::npos);
  CHECK(error_of("P5 20000 20000 255\n").find("more than the 178956970") != std::string::npos);
  CHECK(error_of("P5 2 1 255\n\x01").find("test.pgm") != std::string::npos);
  // A comment inside the header, even inside a number, is skipped as Pillow skips it.
  CHECK(decode("P5\n1#c\n2 1\n255\n" + bytes({9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2}), 1).width ==
        12);
}

TEST_CASE("the header alone gives the size and the stored channels") {
  const std::string file = "P6\n# c\n7 5\n255\n";
  const data::ImageHeader header = data::read_image_header(
      reinterpret_cast<const uint8_t*>(file.data()), file.size(), "test.ppm");
  CHECK(header.width == 7);
  CHECK(header.height == 5);
  CHECK(header.channels == 3);
}
