#include "stb_image_guard.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace rddp::data {

namespace {

// Reads as stb_image's stbi__context does: past the end every byte is 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool at_eof() const { return at_ >= size_; }
  unsigned get8() { return at_ < size_ ? data_[at_++] : 0u; }
  unsigned peek(size_t offset) const { return at_ + offset < size_ ? data_[at_ + offset] : 0u; }
  size_t position() const { return at_; }
  size_t remaining() const { return size_ - std::min(at_, size_); }
  void seek(size_t at) { at_ = at; }
  // Moves to the next 0xFF byte, or to the end.
  void skip_to_ff() {
    const void* next = at_ < size_ ? std::memchr(data_ + at_, 0xFF, size_ - at_) : nullptr;
    at_ = next ? static_cast<size_t>(static_cast<const uint8_t*>(next) - data_) : size_;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// A DHT segment as stbi__process_marker reads it: tables of a class/id byte, 16 code counts
// and the codes, until the segment's length is used up.
bool huffman_segment_fits(Reader in, size_t length) {
  long remaining = static_cast<long>(length) - 2;
  while (remaining > 0) {
    const unsigned class_and_id = in.get8();
    if ((class_and_id >> 4) > 1 || (class_and_id & 15) > 3) return true;  // refused there
    size_t codes = 0;
    for (int i = 0; i < 16; ++i) codes += in.get8();
    if (codes > 256) return false;
    in.seek(in.position() + codes);
    remaining -= 17 + static_cast<long>(codes);
  }
  return true;
}

const char* jpeg_hazard(Reader in) {
  // stb_image takes data for JPEG when it starts with SOI: 0xFF 0xD8, after any further 0xFF.
  if (in.get8() != 0xFF) return nullptr;
  unsigned marker;
  while ((marker = in.get8()) == 0xFF) {
  }
  if (marker != 0xD8) return nullptr;
  // Markers are found as stb_image finds them, between segments and inside entropy-coded data
  // alike: a run of 0xFF bytes and a code. 0xFF 0x00 (a stuffed byte), restart markers, SOI,
  // EOI and TEM have no segment; every other segment is skipped by its length, which is what
  // stb_image consumes of it. Where stb_image would give up (junk, a bad length), walking on
  // only looks at more places than it would read, never fewer.
  for (in.skip_to_ff(); !in.at_eof(); in.skip_to_ff()) {
    while (!in.at_eof() && in.peek(0) == 0xFF) in.get8();
    if (in.at_eof()) break;
    marker = in.get8();
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) continue;
    const size_t length = in.peek(0) << 8 | in.peek(1);
    if (marker == 0xC4) {
      Reader segment = in;
      segment.seek(in.position() + 2);
      if (!huffman_segment_fits(segment, length))
        return "its JPEG data declares a Huffman table of more than 256 codes, which JPEG does "
               "not allow";
    }
    in.seek(in.position() + std::max<size_t>(length, 2));
  }
  return nullptr;
}

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
  if (const char* hazard = jpeg_hazard(Reader(bytes, size))) return hazard;
  return pnm_hazard(Reader(bytes, size));
}

}  // namespace rddp::data
