#include "stb_image_guard.h"

#include <algorithm>
#include <climits>

namespace rddp::data {

namespace {

// Reads as stb_image's stbi__context does: past the end every byte is 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool at_eof() const { return at_ >= size_; }
  unsigned get8() { return at_ < size_ ? data_[at_++] : 0u; }
  size_t remaining() const { return size_ - std::min(at_, size_); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// stbi__pnm_info's parsing, step for step, with the overflow it lacks noticed.
bool pnm_space(unsigned c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

void pnm_skip_whitespace(Reader& in, unsigned& c) {
  for (;;) {
    while (!in.at_eof() && pnm_space(c)) c = in.get8();
    if (in.at_eof() || c != '#') break;
    while (!in.at_eof() && c != '\n' && c != '\r') c = in.get8();
  }
}

// False when the number overflows an int.
bool pnm_integer(Reader& in, unsigned& c, long long& value) {
  value = 0;
  while (!in.at_eof() && c >= '0' && c <= '9') {
    value = value * 10 + (c - '0');
    if (value > INT_MAX) return false;
    c = in.get8();
  }
  return true;
}

const char* pnm_hazard(Reader in) {
  const unsigned p = in.get8(), t = in.get8();
  if (p != 'P' || (t != '5' && t != '6')) return nullptr;
  const unsigned long long channels = t == '6' ? 3 : 1;
  unsigned c = in.get8();
  long long width, height, max_value;
  pnm_skip_whitespace(in, c);
  bool fits = pnm_integer(in, c, width);
  pnm_skip_whitespace(in, c);
  fits = fits && pnm_integer(in, c, height);
  pnm_skip_whitespace(in, c);
  fits = fits && pnm_integer(in, c, max_value);
  if (!fits) return "its PGM/PPM header holds a number larger than 2147483647";
  if (max_value > 65535 || width == 0 || height == 0) return nullptr;  // refused there
  if (max_value > 255)
    return "it is a 16-bit PGM/PPM (maximum value above 255), which this build's stb_image "
           "decodes with its bytes swapped; convert it to 8 bits or to PNG";
  // The pixels follow the one whitespace byte after the maximum value, which is read.
  const unsigned long long pixels = static_cast<unsigned long long>(width) * height;
  if (pixels > in.remaining() / channels)
    return "its PGM/PPM pixel data is shorter than its header says (a truncated file)";
  return nullptr;
}

}  // namespace

const char* stb_image_hazard(const uint8_t* bytes, size_t size) {
  return pnm_hazard(Reader(bytes, size));
}

}  // namespace rddp::data
