#include "jpeg_decode.h"

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE declared first
#include <vector>

#include <jerror.h>
#include <jpeglib.h>

#include "resnet_ddp/data/pillow_colour.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

// libjpeg reports a fatal error by calling error_exit, which must not return: it jumps back
// into the step that called libjpeg, with the message kept for the exception thrown there.
// Only the step functions below call libjpeg, and none of them holds a C++ object with a
// destructor across the jump.
struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf resume;
  char message[JMSG_LENGTH_MAX];
  bool ended_early;  // JWRN_JPEG_EOF: libjpeg padded a cut-off file with grey
};

extern "C" void on_jpeg_error(j_common_ptr info) {
  auto* errors = reinterpret_cast<ErrorManager*>(info->err);
  errors->base.format_message(info, errors->message);
  std::longjmp(errors->resume, 1);
}

// Warnings (level -1) are counted, not printed: a worker thread must not write to stderr
// for every slightly damaged photo, and only a cut-off file changes what we do.
extern "C" void on_jpeg_message(j_common_ptr info, int level) {
  auto* errors = reinterpret_cast<ErrorManager*>(info->err);
  if (level >= 0) return;
  if (errors->base.msg_code == JWRN_JPEG_EOF) errors->ended_early = true;
  ++errors->base.num_warnings;
}

// One decompression: the libjpeg state and its error manager, destroyed with it.
struct Decompressor {
  jpeg_decompress_struct info{};
  ErrorManager errors{};

  Decompressor(const uint8_t* bytes, size_t size) {
    info.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = on_jpeg_error;
    errors.base.emit_message = on_jpeg_message;
    jpeg_create_decompress(&info);
    // Older libjpeg declares the buffer non-const; it is only read.
    jpeg_mem_src(&info, const_cast<unsigned char*>(bytes), static_cast<unsigned long>(size));
  }
  ~Decompressor() { jpeg_destroy_decompress(&info); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
};

bool read_header_step(Decompressor& d) {
  if (setjmp(d.errors.resume)) return false;
  jpeg_read_header(&d.info, TRUE);
  return true;
}

// Decodes every row into `out` (output_height rows of row_bytes) and finishes.
bool decode_step(Decompressor& d, J_COLOR_SPACE colour_space, uint8_t* out, size_t row_bytes) {
  if (setjmp(d.errors.resume)) return false;
  d.info.out_color_space = colour_space;
  jpeg_start_decompress(&d.info);
  // Several rows a call: libjpeg emits up to rec_outbuf_height rows at once.
  constexpr int kRowsPerCall = 16;
  JSAMPROW rows[kRowsPerCall];
  while (d.info.output_scanline < d.info.output_height) {
    const JDIMENSION first = d.info.output_scanline;
    const JDIMENSION left = d.info.output_height - first;
    const JDIMENSION count = left < JDIMENSION(kRowsPerCall) ? left : JDIMENSION(kRowsPerCall);
    for (JDIMENSION r = 0; r < count; ++r) rows[r] = out + size_t(first + r) * row_bytes;
    jpeg_read_scanlines(&d.info, rows, count);
  }
  jpeg_finish_decompress(&d.info);
  return true;
}

[[noreturn]] void fail_damaged(const Decompressor& d, const std::string& what) {
  fail("cannot decode image ", what, ": ", d.errors.message,
       " (libjpeg). The file is damaged or not a JPEG; replace or remove it");
}

ImageHeader header_of(const Decompressor& d, const std::string& what) {
  ImageHeader header;
  header.width = int(d.info.image_width);
  header.height = int(d.info.image_height);
  header.channels = d.info.num_components;
  refuse_oversized_image(d.info.image_width, d.info.image_height, what);
  if (header.channels != 1 && header.channels != 3 && header.channels != 4)
    fail("cannot decode image ", what, ": a JPEG of ", header.channels,
         " components, which Pillow does not read either; convert it to RGB, or remove it");
  return header;
}

// Pillow reads a CMYK JPEG that carries Adobe's marker as inverted ("CMYK;I"): Adobe's
// applications store 255 - ink.
void invert(std::vector<uint8_t>& values) {
  for (uint8_t& v : values) v = uint8_t(255 - v);
}

}  // namespace

bool looks_like_jpeg(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

ImageHeader read_jpeg_header(const uint8_t* bytes, size_t size, const std::string& what) {
  Decompressor d(bytes, size);
  if (!read_header_step(d)) fail_damaged(d, what);
  return header_of(d, what);
}

Image decode_jpeg(const uint8_t* bytes, size_t size, int channels, const std::string& what) {
  RDDP_ASSERT(channels == 1 || channels == 3);  // decode_image refuses other counts
  Decompressor d(bytes, size);
  if (!read_header_step(d)) fail_damaged(d, what);
  const ImageHeader header = header_of(d, what);

  // What libjpeg writes: grey stays grey (Pillow's "L"), colour becomes RGB, and 4 components
  // become CMYK (libjpeg turns YCCK into CMYK), converted to RGB below as Pillow does.
  J_COLOR_SPACE colour_space = JCS_RGB;
  int decoded_channels = 3;
  if (header.channels == 4) {
    colour_space = JCS_CMYK;
    decoded_channels = 4;
  } else if (header.channels == 1) {
    colour_space = JCS_GRAYSCALE;
    decoded_channels = 1;
  }
  const size_t pixels = size_t(header.width) * size_t(header.height);
  const size_t row_bytes = size_t(header.width) * size_t(decoded_channels);
  std::vector<uint8_t> decoded(pixels * size_t(decoded_channels));
  if (!decode_step(d, colour_space, decoded.data(), row_bytes)) fail_damaged(d, what);
  if (d.errors.ended_early)
    fail("cannot decode image ", what, ": the file ends before its image data does (it is "
         "truncated; Pillow refuses it too); copy it again, or remove it");

  if (decoded_channels == 4) {
    if (d.info.saw_Adobe_marker) invert(decoded);
    pillow_cmyk_to_rgb(decoded.data(), pixels, decoded.data());
    decoded.resize(pixels * 3);
    decoded_channels = 3;
  }
  Image image;
  image.height = header.height;
  image.width = header.width;
  image.channels = channels;
  if (channels == decoded_channels) {
    image.pixels = std::move(decoded);
  } else if (channels == 1) {
    pillow_rgb_to_grey(decoded.data(), pixels, decoded.data());
    decoded.resize(pixels);
    image.pixels = std::move(decoded);
  } else {  // grey to RGB: the value three times, as convert("RGB") does
    image.pixels.resize(pixels * 3);
    for (size_t p = 0; p < pixels; ++p)
      image.pixels[3 * p] = image.pixels[3 * p + 1] = image.pixels[3 * p + 2] = decoded[p];
  }
  return image;
}

std::string jpeg_library_version() {
#ifdef LIBJPEG_TURBO_VERSION
#define RDDP_STRINGIFY_VALUE(x) #x
#define RDDP_STRINGIFY(x) RDDP_STRINGIFY_VALUE(x)
  return "libjpeg-turbo " RDDP_STRINGIFY(LIBJPEG_TURBO_VERSION) " (libjpeg API " +
         std::to_string(JPEG_LIB_VERSION) + ")";
#undef RDDP_STRINGIFY
#undef RDDP_STRINGIFY_VALUE
#else
  return "libjpeg (API " + std::to_string(JPEG_LIB_VERSION) + ")";
#endif
}

}  // namespace rddp::data
