#include "png_decode.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "resnet_ddp/crc32.h"
#include "resnet_ddp/data/pillow_colour.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
// What Pillow's reader hands its decoder at most at a time (ImageFile's MAXBLOCK).
constexpr size_t kPillowBlock = 65536;

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Pillow's is_cid: four word characters.
bool is_chunk_type(const uint8_t* p) {
  return std::all_of(p, p + 4, [](uint8_t c) { return std::isalnum(c) || c == '_'; });
}

bool chunk_is(const uint8_t* type, const char* name) { return std::memcmp(type, name, 4) == 0; }

std::string chunk_name(const uint8_t* type) { return std::string(type, type + 4); }

// Samples per pixel of Pillow's (bit depth, colour type) table, or 0 for a pair it does not read.
int samples_per_pixel(int depth, int colour_type) {
  switch (colour_type) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16 ? 1 : 0;
    case 2: return depth == 8 || depth == 16 ? 3 : 0;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8 ? 1 : 0;
    case 4: return depth == 8 || depth == 16 ? 2 : 0;
    case 6: return depth == 8 || depth == 16 ? 4 : 0;
    default: return 0;
  }
}

struct PngLayout {
  uint32_t width = 0;
  uint32_t height = 0;
  int depth = 0;
  int colour_type = 0;
  int samples = 0;  // per pixel
  bool interlaced = false;
  // RGB for each index: PLTE's colours, then the grey ramp Pillow's palettes start as.
  std::array<uint8_t, 256 * 3> palette{};
  size_t first_image_chunk = 0;  // where the first IDAT chunk's length field is
};

// The chunks before the image data, as Pillow's PngImageFile._open reads them: each one's CRC
// checked, IHDR and PLTE taken in, up to the first IDAT.
PngLayout parse_layout(const uint8_t* bytes, size_t size, const std::string& what) {
  RDDP_ASSERT(looks_like_png(bytes, size));
  PngLayout layout;
  for (int i = 0; i < 256; ++i) std::fill_n(layout.palette.data() + 3 * i, 3, uint8_t(i));
  bool have_header = false;
  size_t at = sizeof kSignature;
  for (;;) {
    if (size - at < 8) refuse_image(what, "its PNG data ends before its image data");
    const uint32_t length = be32(bytes + at);
    const uint8_t* type = bytes + at + 4;
    if (!is_chunk_type(type)) refuse_image(what, "its PNG data holds a damaged chunk header");
    if (chunk_is(type, "IDAT")) {
      layout.first_image_chunk = at;
      break;
    }
    if (chunk_is(type, "IEND")) refuse_image(what, "its PNG data ends before any image data (IDAT)");
    const size_t data = at + 8;
    if (length > size - data) refuse_image(what, "its PNG " + chunk_name(type) + " chunk is cut short");
    if (size - data - length < 4)
      refuse_image(what, "its PNG " + chunk_name(type) + " chunk has no CRC (the file is cut short)");
    if (crc32_update(0, type, 4 + size_t(length)) != be32(bytes + data + length))
      refuse_image(what, "its PNG " + chunk_name(type) + " chunk fails its CRC check");
    const uint8_t* body = bytes + data;
    if (chunk_is(type, "IHDR")) {
      if (length < 13) refuse_image(what, "its PNG IHDR chunk is cut short");
      layout.width = be32(body);
      layout.height = be32(body + 4);
      const int samples = samples_per_pixel(body[8], body[9]);
      // Pillow keeps the mode of an earlier IHDR when a later one's pair is unknown.
      if (samples != 0) {
        layout.depth = body[8];
        layout.colour_type = body[9];
        layout.samples = samples;
      }
      if (body[11] != 0) refuse_image(what, "its PNG IHDR names an unknown filter method");
      layout.interlaced = body[12] != 0;
      have_header = true;
    } else if (chunk_is(type, "PLTE") && layout.colour_type == 3 && layout.samples != 0) {
      // Pillow's putpalette refuses more than 256 colours and drops a partial one.
      if (length > 256 * 3) refuse_image(what, "its PNG palette holds more than 256 colours");
      std::copy_n(body, length / 3 * 3, layout.palette.data());
    }
    at = data + length + 4;
  }
  if (!have_header) refuse_image(what, "its PNG data has no IHDR chunk before its image data");
  if (layout.samples == 0)
    refuse_image(what, "its PNG bit depth and colour type are a pair Pillow does not read");
  check_image_size(layout.width, layout.height, what);
  return layout;
}

// The image data as Pillow's PngImageFile.load_read hands it to the decoder: the payloads of
// the IDAT chunks that follow one another from the first, in pieces of at most 64 KiB that
// never cross a chunk. A file cut short gives a short piece, then none.
class ImageDataPieces {
 public:
  ImageDataPieces(const uint8_t* bytes, size_t size, size_t first_chunk)
      : bytes_(bytes), size_(size), chunk_end_(first_chunk), at_(first_chunk) {}

  // False when there is no more image data.
  bool next(const uint8_t*& piece, size_t& length) {
    while (left_in_chunk_ == 0) {
      // The previous chunk's CRC (unchecked, as in Pillow), then the next chunk's header.
      const size_t header = first_ ? chunk_end_ : chunk_end_ + 4;
      first_ = false;
      if (header > size_ || size_ - header < 8) return false;
      if (!is_chunk_type(bytes_ + header + 4) || !chunk_is(bytes_ + header + 4, "IDAT"))
        return false;
      left_in_chunk_ = be32(bytes_ + header);
      at_ = header + 8;
      chunk_end_ = at_ + left_in_chunk_;
    }
    const size_t wanted = std::min<size_t>(kPillowBlock, left_in_chunk_);
    left_in_chunk_ -= wanted;  // what was asked for, as Pillow counts, not what was read
    length = at_ < size_ ? std::min(wanted, size_ - at_) : 0;
    piece = bytes_ + std::min(at_, size_);
    at_ += length;
    return length > 0;
  }

 private:
  const uint8_t* bytes_;
  size_t size_;
  size_t chunk_end_;
  size_t at_;
  size_t left_in_chunk_ = 0;
  bool first_ = true;
};

// Adam7's passes: first column and row, then the steps between them.
struct Pass {
  int x0, y0, dx, dy;
};
constexpr Pass kAdam7[7] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                            {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
constexpr Pass kWhole = {0, 0, 1, 1};

uint8_t paeth(uint8_t a, uint8_t b, uint8_t c) {
  const int p = int(a) + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

// Undoes a row's filter in place; `row` has the filter byte first, `previous` none (zeros for
// a pass's first row). False for a filter type that does not exist.
bool unfilter(uint8_t* row, const uint8_t* previous, size_t length, size_t step) {
  uint8_t* x = row + 1;
  switch (row[0]) {
    case 0:
      return true;
    case 1:
      for (size_t i = step; i < length; ++i) x[i] = uint8_t(x[i] + x[i - step]);
      return true;
    case 2:
      for (size_t i = 0; i < length; ++i) x[i] = uint8_t(x[i] + previous[i]);
      return true;
    case 3:
      for (size_t i = 0; i < length; ++i)
        x[i] = uint8_t(x[i] + ((i >= step ? x[i - step] : 0) + previous[i]) / 2);
      return true;
    case 4:
      for (size_t i = 0; i < length; ++i)
        x[i] = uint8_t(x[i] + paeth(i >= step ? x[i - step] : 0, previous[i],
                                    i >= step ? previous[i - step] : 0));
      return true;
    default:
      return false;
  }
}

// One unfiltered row of `count` pixels to RGB, pixel i landing at out + 3 * i * dx: Pillow's
// unpacking for the file's mode, then its conversion to "RGB".
void row_to_rgb(const PngLayout& layout, const uint8_t* row, size_t count, size_t dx,
                uint8_t* out) {
  const int depth = layout.depth;
  const size_t stride = 3 * dx;
  if (depth < 8) {  // greyscale or palette, 1, 2 or 4 bits, the first pixel in the high bits
    const unsigned mask = (1u << depth) - 1;
    const unsigned scale = depth == 1 ? 255 : depth == 2 ? 85 : 17;  // "1", "L;2", "L;4"
    for (size_t i = 0; i < count; ++i, out += stride) {
      const size_t bit = i * size_t(depth);
      const unsigned v = (row[bit / 8] >> (8 - depth - int(bit % 8))) & mask;
      if (layout.colour_type == 3)
        std::copy_n(layout.palette.data() + 3 * v, 3, out);
      else
        std::fill_n(out, 3, uint8_t(v * scale));
    }
    return;
  }
  const size_t bytes = size_t(depth / 8);
  const size_t pixel = bytes * size_t(layout.samples);
  for (size_t i = 0; i < count; ++i, out += stride) {
    const uint8_t* p = row + i * pixel;
    switch (layout.colour_type) {
      case 0:  // 16 bits: Pillow's mode "I", clipped at 255 by convert
        std::fill_n(out, 3, bytes == 1 ? p[0] : uint8_t(std::min(p[0] << 8 | p[1], 255)));
        break;
      case 3:
        std::copy_n(layout.palette.data() + 3 * p[0], 3, out);
        break;
      case 4:  // grey and alpha: the grey's high byte
        std::fill_n(out, 3, p[0]);
        break;
      default:  // RGB, RGBA: each sample's high byte, alpha dropped
        out[0] = p[0], out[1] = p[bytes], out[2] = p[2 * bytes];
    }
  }
}

// Pillow's ZipDecode, step for step: inflate into one row (and its filter byte) at a time,
// feeding zlib only while input is left, finishing when the last row is done.
class RowInflater {
 public:
  RowInflater(const PngLayout& layout, const std::string& what, Image& image)
      : layout_(layout), what_(what), image_(image) {
    std::memset(&stream_, 0, sizeof stream_);
    if (inflateInit(&stream_) != Z_OK) fail("cannot decode image ", what, ": zlib cannot start");
    pass_ = layout.interlaced ? 0 : -1;
    start_pass();
  }
  ~RowInflater() { inflateEnd(&stream_); }
  RowInflater(const RowInflater&) = delete;
  RowInflater& operator=(const RowInflater&) = delete;

  bool done() const { return done_; }

  void feed(const uint8_t* piece, size_t length) {
    stream_.next_in = const_cast<Bytef*>(piece);
    stream_.avail_in = uInt(length);
    while (stream_.avail_in > 0 && !done_) {
      stream_.next_out = row_.data() + filled_;
      stream_.avail_out = uInt(row_.size() - filled_);
      const int status = inflate(&stream_, Z_NO_FLUSH);
      if (status < 0)
        refuse_image(what_, std::string("its PNG image data is damaged (zlib: ") +
                           (stream_.msg ? stream_.msg : "error " + std::to_string(status)) + ")");
      filled_ = row_.size() - stream_.avail_out;
      if (filled_ < row_.size()) break;  // needs more input
      finish_row();
    }
  }

 private:
  const Pass& pass() const { return pass_ < 0 ? kWhole : kAdam7[pass_]; }

  size_t pass_columns() const {
    const Pass& p = pass();
    return layout_.width > uint32_t(p.x0) ? (layout_.width - p.x0 + p.dx - 1) / p.dx : 0;
  }
  size_t pass_rows() const {
    const Pass& p = pass();
    return layout_.height > uint32_t(p.y0) ? (layout_.height - p.y0 + p.dy - 1) / p.dy : 0;
  }

  // Moves to the first Adam7 pass (from the current one) that has pixels; done when none is
  // left. A whole image (pass -1) always has pixels: parse_layout refuses a side of 0.
  void start_pass() {
    if (pass_ >= 0)
      while (pass_ < 7 && (pass_columns() == 0 || pass_rows() == 0)) ++pass_;
    if (pass_ >= 7) {
      done_ = true;
      return;
    }
    const size_t bits = size_t(layout_.depth) * size_t(layout_.samples);
    row_bytes_ = (pass_columns() * bits + 7) / 8;
    step_ = std::max<size_t>(1, bits / 8);
    row_.assign(row_bytes_ + 1, 0);
    previous_.assign(row_bytes_, 0);
    y_ = 0;
    filled_ = 0;
  }

  void finish_row() {
    if (!unfilter(row_.data(), previous_.data(), row_bytes_, step_))
      refuse_image(what_, "its PNG image data names filter type " + std::to_string(row_[0]) +
                         ", which does not exist");
    const Pass& p = pass();
    uint8_t* out = image_.at(int(p.y0 + y_ * p.dy), p.x0);
    row_to_rgb(layout_, row_.data() + 1, pass_columns(), size_t(p.dx), out);
    std::copy(row_.begin() + 1, row_.end(), previous_.begin());
    filled_ = 0;
    if (++y_ < pass_rows()) return;
    if (pass_ < 0) {
      done_ = true;
      return;
    }
    ++pass_;
    start_pass();
  }

  const PngLayout& layout_;
  const std::string& what_;
  Image& image_;
  z_stream stream_;
  int pass_ = -1;  // -1: not interlaced
  size_t row_bytes_ = 0;
  size_t step_ = 1;
  size_t y_ = 0;
  size_t filled_ = 0;
  std::vector<uint8_t> row_;
  std::vector<uint8_t> previous_;
  bool done_ = false;
};

}  // namespace

bool looks_like_png(const uint8_t* bytes, size_t size) {
  return size >= sizeof kSignature && std::equal(kSignature, kSignature + 8, bytes);
}

ImageHeader read_png_header(const uint8_t* bytes, size_t size, const std::string& what) {
  const PngLayout layout = parse_layout(bytes, size, what);
  ImageHeader header;
  header.width = int(layout.width);
  header.height = int(layout.height);
  header.channels = layout.samples;
  return header;
}

Image decode_png(const uint8_t* bytes, size_t size, int channels, const std::string& what) {
  RDDP_ASSERT(channels == 1 || channels == 3);
  const PngLayout layout = parse_layout(bytes, size, what);
  Image image(int(layout.height), int(layout.width), 3);
  {
    RowInflater rows(layout, what, image);
    ImageDataPieces pieces(bytes, size, layout.first_image_chunk);
    const uint8_t* piece = nullptr;
    size_t length = 0;
    while (!rows.done() && pieces.next(piece, length)) rows.feed(piece, length);
    if (!rows.done())
      refuse_image(what, "its PNG image data ends before the image does (a truncated file)");
  }
  if (channels == 1) {
    const size_t count = size_t(image.height) * image.width;
    pillow_rgb_to_grey(image.pixels.data(), count, image.pixels.data());
    image.pixels.resize(count);
    image.channels = 1;
  }
  return image;
}

}  // namespace rddp::data
