#include "bmp_decode.h"

#include <algorithm>
#include <array>
#include <vector>

#include "resnet_ddp/data/pillow_colour.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

enum Compression : uint32_t { kRaw = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3 };

// How a pixel's bytes become RGB: Pillow's raw modes, named as Pillow names them.
enum class PixelFormat { palette, bgr15, bgr16, bgr, bgrx, xbgr, abgr, rgba, bgra };

struct BmpLayout {
  int64_t width = 0;
  int64_t height = 0;
  bool top_down = false;  // rows stored first to last; BMP's default is last to first
  int bits = 0;
  uint32_t compression = kRaw;
  PixelFormat format = PixelFormat::palette;
  // RGB for each index; Pillow's palettes start as the grey ramp, which entries past the
  // file's palette keep.
  std::array<uint8_t, 256 * 3> palette{};
  size_t data_offset = 0;
};

// Many BMP refusals are of kinds Pillow does not read, not of damage: the fix says both.
[[noreturn]] void damaged(const std::string& what, const std::string& why) {
  refuse_image(what, why, "the file is damaged or of a kind Pillow does not read either: "
                          "convert it to PNG, or remove it");
}

uint32_t u16(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t u32(const uint8_t* p) { return u16(p) | u16(p + 2) << 16; }

struct Masks {
  uint32_t r, g, b, a;
  bool operator==(const Masks& o) const { return r == o.r && g == o.g && b == o.b && a == o.a; }
};

// BmpImagePlugin's SUPPORTED and MASK_MODES tables: the only bitfield layouts Pillow reads.
PixelFormat bitfield_format(int bits, const Masks& masks, const std::string& what) {
  struct Known {
    int bits;
    Masks masks;
    bool alpha_matters;  // 24- and 16-bit layouts are matched on R, G and B alone
    PixelFormat format;
  };
  static const Known kKnown[] = {
      {32, {0xFF0000, 0xFF00, 0xFF, 0}, true, PixelFormat::bgrx},
      {32, {0xFF000000, 0xFF0000, 0xFF00, 0}, true, PixelFormat::xbgr},
      {32, {0xFF000000, 0xFF0000, 0xFF00, 0xFF}, true, PixelFormat::abgr},
      {32, {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, true, PixelFormat::rgba},
      {32, {0xFF0000, 0xFF00, 0xFF, 0xFF000000}, true, PixelFormat::bgra},
      {32, {0, 0, 0, 0}, true, PixelFormat::bgra},
      {24, {0xFF0000, 0xFF00, 0xFF, 0}, false, PixelFormat::bgr},
      {16, {0xF800, 0x7E0, 0x1F, 0}, false, PixelFormat::bgr16},
      {16, {0x7C00, 0x3E0, 0x1F, 0}, false, PixelFormat::bgr15},
  };
  for (const Known& known : kKnown) {
    const Masks compared = known.alpha_matters ? masks : Masks{masks.r, masks.g, masks.b, 0};
    if (known.bits == bits && known.masks == compared) return known.format;
  }
  damaged(what, "its BMP bitfields (" + std::to_string(bits) + " bits) are laid out in a way "
                "Pillow does not read");
}

BmpLayout parse_layout(const uint8_t* bytes, size_t size, const std::string& what) {
  RDDP_ASSERT(looks_like_bmp(bytes, size));
  if (size < 18) damaged(what, "its BMP file header is cut short");
  BmpLayout layout;
  size_t offset = u32(bytes + 10);
  const uint32_t header_size = u32(bytes + 14);
  if (header_size != 12 && header_size != 40 && header_size != 64 && header_size != 108 &&
      header_size != 124)
    damaged(what, "its BMP header is " + std::to_string(header_size) +
                      " bytes long, none of the sizes Pillow reads (12, 40, 64, 108, 124)");
  if (size < 14 + size_t(header_size)) damaged(what, "its BMP header is cut short");
  const uint8_t* header = bytes + 18;  // after the size
  size_t cursor = 14 + header_size;
  uint32_t colours = 0;
  size_t palette_entry_bytes = 4;
  Masks masks{0, 0, 0, 0};
  if (header_size == 12) {  // OS/2 1.x: 16-bit sides, no compression, 3-byte palette entries
    layout.width = u16(header);
    layout.height = u16(header + 2);
    layout.bits = int(u16(header + 6));
    palette_entry_bytes = 3;
  } else {
    // Pillow takes a height whose top byte is 0xFF as negative (rows top to bottom), and any
    // other as positive, however large.
    layout.top_down = header[7] == 0xFF;
    layout.width = u32(header);
    layout.height = layout.top_down ? (int64_t(1) << 32) - u32(header + 4) : u32(header + 4);
    layout.bits = int(u16(header + 10));
    layout.compression = u32(header + 12);
    colours = u32(header + 28);
    if (layout.compression == kBitfields) {
      if (header_size - 4 >= 52) {
        masks = {u32(header + 36), u32(header + 40), u32(header + 44), u32(header + 48)};
      } else {  // three masks follow a 40-byte header
        if (size < cursor + 12) damaged(what, "its BMP bitfield masks are cut short");
        masks = {u32(bytes + cursor), u32(bytes + cursor + 4), u32(bytes + cursor + 8), 0};
        cursor += 12;
      }
    }
  }
  check_image_size(layout.width, layout.height, what);
  const int bits = layout.bits;
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32)
    damaged(what, "its BMP pixels have " + std::to_string(bits) +
                      " bits, which Pillow does not read (1, 4, 8, 16, 24 or 32)");
  const uint64_t palette_size = colours != 0 ? colours : uint64_t(1) << std::min(bits, 32);
  // Writers that forget the palette in the data offset: Pillow steps over it (4 bytes an
  // entry, even for 3-byte entries).
  if (offset == 14 + size_t(header_size) && bits <= 8) offset += 4 * palette_size;

  switch (layout.compression) {
    case kBitfields:
      layout.format = bitfield_format(bits, masks, what);
      break;
    case kRaw:
      layout.format = bits <= 8 ? PixelFormat::palette
                      : bits == 16 ? PixelFormat::bgr15
                      : bits == 24 ? PixelFormat::bgr
                                   : PixelFormat::bgrx;
      break;
    case kRle8:
    case kRle4:
      if (bits > 8)
        damaged(what, "it is a run-length encoded BMP of " + std::to_string(bits) +
                          " bits a pixel; such files hold palette indices of 8 bits or fewer");
      layout.format = PixelFormat::palette;
      break;
    default:
      damaged(what, "its BMP compression is " + std::to_string(layout.compression) +
                        ", which Pillow does not read (it reads none, RLE8, RLE4, bitfields)");
  }

  for (int i = 0; i < 256; ++i) std::fill_n(layout.palette.data() + 3 * i, 3, uint8_t(i));
  if (layout.format == PixelFormat::palette) {
    if (palette_size > 65536)
      damaged(what, "its BMP palette has " + std::to_string(palette_size) +
                        " colours, more than the 65536 Pillow reads");
    if ((size - cursor) / palette_entry_bytes < palette_size)
      damaged(what, "its BMP palette is cut short");
    const size_t kept = std::min<uint64_t>(palette_size, 256);
    for (size_t i = 0; i < kept; ++i) {
      const uint8_t* bgr = bytes + cursor + i * palette_entry_bytes;
      layout.palette[3 * i] = bgr[2];
      layout.palette[3 * i + 1] = bgr[1];
      layout.palette[3 * i + 2] = bgr[0];
    }
    cursor += palette_size * palette_entry_bytes;
  }
  layout.data_offset = offset != 0 ? offset : cursor;
  if (layout.data_offset > size) damaged(what, "its BMP pixel data starts past its end");
  return layout;
}

// Pillow's unpackers, one pixel to RGB. 5- and 6-bit samples widen as v * 255 / 31 (or 63),
// truncated.
void unpack_pixel(PixelFormat format, const uint8_t* p, uint8_t* rgb) {
  switch (format) {
    case PixelFormat::bgr15:
    case PixelFormat::bgr16: {
      const uint32_t v = u16(p);
      const bool six_green = format == PixelFormat::bgr16;
      rgb[0] = uint8_t(((v >> (six_green ? 11 : 10)) & 31) * 255 / 31);
      rgb[1] = uint8_t(six_green ? ((v >> 5) & 63) * 255 / 63 : ((v >> 5) & 31) * 255 / 31);
      rgb[2] = uint8_t((v & 31) * 255 / 31);
      return;
    }
    case PixelFormat::bgr:
    case PixelFormat::bgrx:
    case PixelFormat::bgra:
      rgb[0] = p[2], rgb[1] = p[1], rgb[2] = p[0];
      return;
    case PixelFormat::xbgr:
    case PixelFormat::abgr:
      rgb[0] = p[3], rgb[1] = p[2], rgb[2] = p[1];
      return;
    case PixelFormat::rgba:
      rgb[0] = p[0], rgb[1] = p[1], rgb[2] = p[2];
      return;
    case PixelFormat::palette:
      break;
  }
  RDDP_ASSERT(false);
}

// Uncompressed rows, each padded to a multiple of 4 bytes, into RGB rows top to bottom. The
// data's length is checked before the image is allocated, so that a short file cannot make
// the decoder allocate for the pixels its header claims.
Image decode_rows(const BmpLayout& layout, const uint8_t* data, size_t available,
                  const std::string& what) {
  const size_t width = size_t(layout.width), height = size_t(layout.height);
  const size_t row_bytes = (width * size_t(layout.bits) + 7) / 8;
  const size_t stride = (row_bytes + 3) & ~size_t(3);
  // The last row needs no padding (Pillow reads a file that ends without it).
  if (available < row_bytes || (available - row_bytes) / stride < height - 1)
    damaged(what, "its BMP pixel data is shorter than its header says (a truncated file)");
  const size_t pixel_bytes = size_t(layout.bits) / 8;
  Image image(int(height), int(width), 3);
  for (size_t row = 0; row < height; ++row) {
    const uint8_t* in = data + row * stride;
    uint8_t* out = image.at(int(layout.top_down ? row : height - 1 - row), 0);
    for (size_t x = 0; x < width; ++x, out += 3) {
      if (layout.format != PixelFormat::palette) {
        unpack_pixel(layout.format, in + x * pixel_bytes, out);
        continue;
      }
      // 1- and 4-bit indices: the first pixel in the highest bits.
      const int bits = layout.bits;
      const size_t bit = x * size_t(bits);
      const unsigned index = (in[bit / 8] >> (8 - bits - int(bit % 8))) & ((1u << bits) - 1);
      std::copy_n(layout.palette.data() + 3 * index, 3, out);
    }
  }
  return image;
}

// Pillow 9's BmpRleDecoder, step for step, quirks included: a delta escape takes its offsets
// from the two bytes after the two it reads first, an absolute run of n 4-bit pixels reads
// n / 2 bytes (rounded down) and gives 2 (n / 2) pixels, and runs are padded to an even
// position in the file. Returns the indices in file row order.
std::vector<uint8_t> run_length_indices(const BmpLayout& layout, const uint8_t* bytes,
                                        size_t size, const std::string& what) {
  const bool rle4 = layout.compression == kRle4;
  const size_t width = size_t(layout.width);
  const size_t total = width * size_t(layout.height);
  std::vector<uint8_t> indices;
  size_t at = layout.data_offset, x = 0;
  while (indices.size() < total) {
    if (at >= size || size - at < 2) break;  // `at` may stand one past the end after padding
    size_t count = bytes[at];
    const uint8_t value = bytes[at + 1];
    at += 2;
    if (count != 0) {
      if (x + count > width) count = x < width ? width - x : 0;
      for (size_t i = 0; i < count; ++i)
        indices.push_back(!rle4 ? value : i % 2 == 0 ? value >> 4 : value & 0x0F);
      x += count;
    } else if (value == 0) {  // end of line
      while (indices.size() % width != 0) indices.push_back(0);
      x = 0;
    } else if (value == 1) {  // end of bitmap
      break;
    } else if (value == 2) {  // delta
      if (at >= size || size - at < 2) break;
      at += 2;
      if (size - at < 2) damaged(what, "its run-length data ends inside a delta escape");
      indices.insert(indices.end(), bytes[at] + size_t(bytes[at + 1]) * width, uint8_t(0));
      at += 2;
      x = indices.size() % width;
    } else {  // an absolute run of `value` pixels
      const size_t wanted = rle4 ? value / 2 : value;
      const size_t got = at < size ? std::min(wanted, size - at) : 0;
      for (size_t i = 0; i < got; ++i) {
        if (rle4) {
          indices.push_back(bytes[at + i] >> 4);
          indices.push_back(bytes[at + i] & 0x0F);
        } else {
          indices.push_back(bytes[at + i]);
        }
      }
      at += got;
      if (got < wanted) break;
      x += value;
      if (at % 2 != 0) ++at;
    }
  }
  if (indices.size() < total)
    damaged(what, "its run-length data gives fewer pixels than its header says (a truncated "
                  "file)");
  indices.resize(total);
  return indices;
}

}  // namespace

bool looks_like_bmp(const uint8_t* bytes, size_t size) {
  return size >= 2 && bytes[0] == 'B' && bytes[1] == 'M';
}

ImageHeader read_bmp_header(const uint8_t* bytes, size_t size, const std::string& what) {
  const BmpLayout layout = parse_layout(bytes, size, what);
  ImageHeader header;
  header.width = int(layout.width);
  header.height = int(layout.height);
  header.channels = layout.format == PixelFormat::palette ? 1 : 3;
  return header;
}

Image decode_bmp(const uint8_t* bytes, size_t size, int channels, const std::string& what) {
  RDDP_ASSERT(channels == 1 || channels == 3);
  const BmpLayout layout = parse_layout(bytes, size, what);
  const size_t width = size_t(layout.width), height = size_t(layout.height);
  Image image;
  if (layout.compression == kRle8 || layout.compression == kRle4) {
    const std::vector<uint8_t> indices = run_length_indices(layout, bytes, size, what);
    image = Image(int(height), int(width), 3);
    for (size_t row = 0; row < height; ++row) {
      uint8_t* out = image.at(int(layout.top_down ? row : height - 1 - row), 0);
      for (size_t x = 0; x < width; ++x)
        std::copy_n(layout.palette.data() + 3 * indices[row * width + x], 3, out + 3 * x);
    }
  } else {
    image = decode_rows(layout, bytes + layout.data_offset, size - layout.data_offset, what);
  }
  if (channels == 1) {
    // A palette image converts to grey through its palette's colours, as "RGB" does.
    const size_t count = width * height;
    pillow_rgb_to_grey(image.pixels.data(), count, image.pixels.data());
    image.pixels.resize(count);
    image.channels = 1;
  }
  return image;
}

}  // namespace rddp::data
