#include "pnm_decode.h"

#include <algorithm>
#include <cmath>

#include "resnet_ddp/data/pillow_colour.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

enum class PnmKind { bitmap, grey, rgb };

struct PnmHeader {
  PnmKind kind = PnmKind::grey;
  bool plain = false;  // P1, P2, P3: samples as decimal text
  int64_t width = 0;
  int64_t height = 0;
  int64_t max_value = 1;
  size_t data_offset = 0;

  int bands() const { return kind == PnmKind::rgb ? 3 : 1; }
};

// Pillow's whitespace (b_whitespace), which is also what Python's bytes.split() splits on.
bool pnm_space(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Pillow's longest header token; a longer one is refused.
constexpr size_t kMaxToken = 10;

// One header token as Pillow's _read_token reads it: whitespace before it skipped, a '#'
// comment skipped up to and with its CR or LF (also in the middle of a token, whose characters
// then join), and the one whitespace byte after it consumed.
std::string read_token(const uint8_t* bytes, size_t size, size_t& at, const std::string& what) {
  std::string token;
  while (token.size() <= kMaxToken && at < size) {
    const uint8_t c = bytes[at++];
    if (pnm_space(c)) {
      if (token.empty()) continue;
      break;
    }
    if (c == '#') {
      while (at < size) {
        const uint8_t skipped = bytes[at++];
        if (skipped == '\r' || skipped == '\n') break;
      }
      continue;
    }
    token.push_back(static_cast<char>(c));
  }
  if (token.empty()) refuse_image(what, "its PGM/PPM header ends before its size and maximum value");
  if (token.size() > kMaxToken)
    refuse_image(what, "its PGM/PPM header holds a number longer than 10 digits");
  return token;
}

// Python's int() would also take signs and underscores; no writer puts them in a header.
int64_t decimal(const std::string& token, const std::string& what, const char* field) {
  int64_t value = 0;
  for (char c : token) {
    if (c < '0' || c > '9')
      refuse_image(what, std::string("its PGM/PPM header has '") + token + "' where its " + field +
                        " belongs");
    value = value * 10 + (c - '0');
  }
  return value;
}

PnmHeader parse_header(const uint8_t* bytes, size_t size, const std::string& what) {
  RDDP_ASSERT(looks_like_pnm(bytes, size));
  PnmHeader header;
  const char digit = static_cast<char>(bytes[1]);
  header.plain = digit <= '3';
  header.kind = (digit == '1' || digit == '4')   ? PnmKind::bitmap
                : (digit == '2' || digit == '5') ? PnmKind::grey
                                                 : PnmKind::rgb;
  size_t at = 3;
  header.width = decimal(read_token(bytes, size, at, what), what, "width");
  header.height = decimal(read_token(bytes, size, at, what), what, "height");
  if (header.kind != PnmKind::bitmap) {
    header.max_value = decimal(read_token(bytes, size, at, what), what, "maximum value");
    if (header.max_value < 1 || header.max_value > 65535)
      refuse_image(what, "its PGM/PPM maximum value is " + std::to_string(header.max_value) +
                        ", where Pillow reads 1 to 65535");
  }
  check_image_size(header.width, header.height, what);
  header.data_offset = at;
  return header;
}

// A sample as Pillow's PpmDecoder and PpmPlainDecoder scale it: to 0..65535 in a 16-bit
// greymap (Pillow's mode "I"), else to 0..255, rounding half to even (Python's round()); then
// as Image.convert clips "I" to "L" or "RGB". A maximum value of 255 is the identity.
class SampleScale {
 public:
  explicit SampleScale(const PnmHeader& header)
      : max_value_(static_cast<double>(header.max_value)),
        out_max_(header.kind == PnmKind::grey && header.max_value > 255 ? 65535.0 : 255.0) {}

  uint8_t operator()(uint32_t sample) const {
    const double scaled = std::min(out_max_, std::nearbyint(sample / max_value_ * out_max_));
    return static_cast<uint8_t>(std::min(scaled, 255.0));
  }

 private:
  double max_value_;
  double out_max_;
};

void decode_binary(const PnmHeader& header, const uint8_t* data, size_t available,
                   const std::string& what, uint8_t* out) {
  const size_t width = size_t(header.width), height = size_t(header.height);
  if (header.kind == PnmKind::bitmap) {
    // Rows of whole bytes, the first pixel in the highest bit; 1 is black.
    const size_t row_bytes = (width + 7) / 8;
    if (available / row_bytes < height)
      refuse_image(what, "its PBM pixel data is shorter than its header says (a truncated file)");
    for (size_t y = 0; y < height; ++y)
      for (size_t x = 0; x < width; ++x)
        *out++ = ((data[y * row_bytes + x / 8] >> (7 - x % 8)) & 1u) ? 0 : 255;
    return;
  }
  const size_t samples = width * height * size_t(header.bands());
  const size_t sample_bytes = header.max_value < 256 ? 1 : 2;
  if (available / sample_bytes < samples)
    refuse_image(what, "its PGM/PPM pixel data is shorter than its header says (a truncated file)");
  if (header.max_value == 255) {
    std::copy(data, data + samples, out);
    return;
  }
  const SampleScale scale(header);
  for (size_t i = 0; i < samples; ++i)
    out[i] = scale(sample_bytes == 1 ? data[i] : (uint32_t(data[2 * i]) << 8) | data[2 * i + 1]);
}

// The text after the header with Pillow's PpmPlainDecoder's comment rule applied: from '#' up
// to and with the next CR or LF is removed, wherever it stands.
std::string without_comments(const uint8_t* data, size_t size) {
  std::string text;
  text.reserve(size);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != '#') {
      text.push_back(static_cast<char>(data[i]));
      continue;
    }
    while (i + 1 < size && data[i + 1] != '\r' && data[i + 1] != '\n') ++i;
    ++i;  // the CR or LF
  }
  return text;
}

void decode_plain(const PnmHeader& header, const uint8_t* data, size_t available,
                  const std::string& what, uint8_t* out) {
  const std::string text = without_comments(data, available);
  const size_t samples = size_t(header.width) * size_t(header.height) * size_t(header.bands());
  size_t written = 0;
  if (header.kind == PnmKind::bitmap) {
    // Every sample is one character; whitespace between them is optional.
    for (char c : text) {
      if (pnm_space(static_cast<uint8_t>(c))) continue;
      if (c != '0' && c != '1')
        refuse_image(what, std::string("its plain PBM data holds '") + c + "', where only 0 and 1 "
                                                                      "belong");
      if (written < samples) out[written++] = c == '1' ? 0 : 255;
    }
  } else {
    const SampleScale scale(header);
    size_t at = 0;
    while (written < samples) {
      while (at < text.size() && pnm_space(static_cast<uint8_t>(text[at]))) ++at;
      if (at == text.size()) break;
      const size_t end = std::find_if(text.begin() + at, text.end(),
                                      [](char c) { return pnm_space(static_cast<uint8_t>(c)); }) -
                         text.begin();
      const std::string token = text.substr(at, end - at);
      at = end;
      if (token.size() > kMaxToken)
        refuse_image(what, "its plain PGM/PPM data holds a sample longer than 10 digits");
      const int64_t sample = decimal(token, what, "sample");
      if (sample > header.max_value)
        refuse_image(what, "its plain PGM/PPM data holds the sample " + token +
                          ", above the header's maximum value " +
                          std::to_string(header.max_value));
      out[written++] = scale(uint32_t(sample));
    }
  }
  if (written < samples)
    refuse_image(what, "its plain PGM/PPM data has fewer samples than its header says (a "
                  "truncated file)");
}

}  // namespace

bool looks_like_pnm(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '6' &&
         pnm_space(bytes[2]);
}

ImageHeader read_pnm_header(const uint8_t* bytes, size_t size, const std::string& what) {
  const PnmHeader header = parse_header(bytes, size, what);
  ImageHeader result;
  result.width = int(header.width);
  result.height = int(header.height);
  result.channels = header.bands();
  return result;
}

Image decode_pnm(const uint8_t* bytes, size_t size, int channels, const std::string& what) {
  RDDP_ASSERT(channels == 1 || channels == 3);
  const PnmHeader header = parse_header(bytes, size, what);
  const int bands = header.bands();
  Image image(int(header.height), int(header.width), std::max(bands, channels));
  const uint8_t* data = bytes + header.data_offset;
  const size_t available = size - header.data_offset;
  if (header.plain)
    decode_plain(header, data, available, what, image.pixels.data());
  else
    decode_binary(header, data, available, what, image.pixels.data());
  const size_t count = size_t(image.height) * image.width;
  if (bands == 3 && channels == 1) {
    pillow_rgb_to_grey(image.pixels.data(), count, image.pixels.data());
    image.pixels.resize(count);
  } else if (bands == 1 && channels == 3) {
    pillow_grey_to_rgb(image.pixels.data(), count, image.pixels.data());
  }
  image.channels = channels;
  return image;
}

}  // namespace rddp::data
