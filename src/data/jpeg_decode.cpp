#include "jpeg_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE declared first
#include <cstring>
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

// The rows and columns a decode writes: the whole image, or a region's rows and, around its
// columns, what libjpeg-turbo decodes of them (whole iMCU columns).
struct Window {
  JDIMENSION left = 0, width = 0, top = 0, height = 0;
};

// Whether libjpeg-turbo's cropped decoding (jpeg_crop_scanline, jpeg_skip_scanlines) gives this
// image's region the bytes a whole decode gives it, once widened by a pixel a side: checked for
// greyscale and the subsamplings Pillow writes (4:4:4, 4:2:2, 4:2:0), where smooth chroma
// upsampling reads one chroma sample beyond a pixel's own. Other layouts decode whole, and so do
// progressive JPEGs: one whose scans stop before its chroma's AC coefficients decoded its cropped
// columns grey where a whole decode (and Pillow) gives colour (found by fuzzing; the input is
// tests/fuzz/regressions/image/progressive-jpeg-without-chroma-ac-scans). Cropping saved them
// less in any case: their entropy decoding covers the whole image before the first row comes out.
bool crops_exactly(const jpeg_decompress_struct& info) {
#ifdef LIBJPEG_TURBO_VERSION
  if (info.progressive_mode) return false;
  const jpeg_component_info* c = info.comp_info;
  for (int i = 1; i < info.num_components; ++i)
    if (c[i].h_samp_factor != 1 || c[i].v_samp_factor != 1) return false;
  const int h = c[0].h_samp_factor, v = c[0].v_samp_factor;
  return (h == 1 && v == 1) || (h == 2 && v == 1) || (h == 2 && v == 2);
#else
  (void)info;
  return false;
#endif
}

// Starts decompressing: the whole image, or only what `region` needs when that decodes exactly
// (crops_exactly): its columns widened by a pixel a side, because smooth upsampling treats the
// first and last decoded columns as the image's edges, and its rows, those above skipped.
bool start_step(Decompressor& d, J_COLOR_SPACE colour_space, const CropBox* region,
                Window& window) {
  if (setjmp(d.errors.resume)) return false;
  d.info.out_color_space = colour_space;
  jpeg_start_decompress(&d.info);
  window = {0, d.info.output_width, 0, d.info.output_height};
  if (region == nullptr) return true;
  window.top = JDIMENSION(region->top);
  window.height = JDIMENSION(region->height);
#ifdef LIBJPEG_TURBO_VERSION
  if (crops_exactly(d.info)) {
    const JDIMENSION first = JDIMENSION(region->left > 0 ? region->left - 1 : 0);
    const JDIMENSION end =
        std::min(d.info.output_width, JDIMENSION(region->left + region->width + 1));
    if (end - first < d.info.output_width) {
      window.left = first;
      window.width = end - first;
      jpeg_crop_scanline(&d.info, &window.left, &window.width);
    }
    if (window.top > 0) jpeg_skip_scanlines(&d.info, window.top);
    return true;
  }
  // Decoded whole down to the region's last row; the rows below are passed over.
  window.top = 0;
  window.height = JDIMENSION(region->top + region->height);
#else
  window.top = 0;  // decoded whole
  window.height = d.info.output_height;
#endif
  return true;
}

// Reads the window's rows into `out` (rows of window.width pixels of `channels`, and room for
// one more), passes over the rows below it and finishes. The last row is read, not skipped:
// libjpeg-turbo skipping to the end stops reading the file there, and a file cut off below the
// window must be noticed (and refused) as in a whole decode.
bool read_step(Decompressor& d, const Window& window, int channels, uint8_t* out) {
  if (setjmp(d.errors.resume)) return false;
  const size_t row_bytes = size_t(d.info.output_width) * size_t(channels);
  // Several rows a call: libjpeg emits up to rec_outbuf_height rows at once.
  constexpr int kRowsPerCall = 16;
  JSAMPROW rows[kRowsPerCall];
  const JDIMENSION end = window.top + window.height;
  while (d.info.output_scanline < end) {
    const JDIMENSION first = d.info.output_scanline;
    const JDIMENSION count = std::min(end - first, JDIMENSION(kRowsPerCall));
    for (JDIMENSION r = 0; r < count; ++r) rows[r] = out + size_t(first - window.top + r) * row_bytes;
    jpeg_read_scanlines(&d.info, rows, count);
  }
#ifdef LIBJPEG_TURBO_VERSION  // elsewhere start_step's window holds every row
  if (d.info.output_scanline < d.info.output_height) {
    const JDIMENSION below = d.info.output_height - d.info.output_scanline;
    if (below > 1) jpeg_skip_scanlines(&d.info, below - 1);
    JSAMPROW last = out + size_t(window.height) * row_bytes;
    jpeg_read_scanlines(&d.info, &last, 1);
  }
#endif
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
  check_image_size(d.info.image_width, d.info.image_height, what);
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

Image decode_jpeg(const uint8_t* bytes, size_t size, int channels, const std::string& what,
                  const ChooseCrop* choose) {
  RDDP_ASSERT(channels == 1 || channels == 3);  // decode_image refuses other counts
  Decompressor d(bytes, size);
  if (!read_header_step(d)) fail_damaged(d, what);
  const ImageHeader header = header_of(d, what);
  const CropBox box =
      choose ? (*choose)(header.height, header.width) : CropBox{0, 0, header.height, header.width};
  const CropBox* region = choose ? &box : nullptr;
  RDDP_ASSERT(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 &&
              box.top + box.height <= header.height && box.left + box.width <= header.width);

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
  Window window;
  if (!start_step(d, colour_space, region, window)) fail_damaged(d, what);
  // libjpeg writes rows of output_width, which jpeg_crop_scanline set to the window's width.
  std::vector<uint8_t> decoded(size_t(window.height + 1) * d.info.output_width *
                               size_t(decoded_channels));
  if (!read_step(d, window, decoded_channels, decoded.data())) fail_damaged(d, what);
  if (d.errors.ended_early)
    fail("cannot decode image ", what, ": the file ends before its image data does (it is "
         "truncated; Pillow refuses it too); copy it again, or remove it");
  const size_t pixels = size_t(box.height) * size_t(box.width);
  const bool exact = window.top == JDIMENSION(box.top) && window.left == JDIMENSION(box.left) &&
                     d.info.output_width == JDIMENSION(box.width);
  if (!exact) {  // the box out of the window's rows, in place: each row moves towards the front
    const size_t in_row = size_t(d.info.output_width) * size_t(decoded_channels);
    const size_t out_row = size_t(box.width) * size_t(decoded_channels);
    const size_t first = (size_t(box.top) - window.top) * in_row +
                         (size_t(box.left) - window.left) * size_t(decoded_channels);
    for (size_t y = 0; y < size_t(box.height); ++y)
      std::memmove(decoded.data() + y * out_row, decoded.data() + first + y * in_row, out_row);
  }
  decoded.resize(pixels * size_t(decoded_channels));  // without the spare row read_step read last

  if (decoded_channels == 4) {
    if (d.info.saw_Adobe_marker) invert(decoded);
    pillow_cmyk_to_rgb(decoded.data(), pixels, decoded.data());
    decoded.resize(pixels * 3);
    decoded_channels = 3;
  }
  Image image;
  image.height = box.height;
  image.width = box.width;
  image.channels = channels;
  if (channels == decoded_channels) {
    image.pixels = std::move(decoded);
  } else if (channels == 1) {
    pillow_rgb_to_grey(decoded.data(), pixels, decoded.data());
    decoded.resize(pixels);
    image.pixels = std::move(decoded);
  } else {
    image.pixels.resize(pixels * 3);
    pillow_grey_to_rgb(decoded.data(), pixels, image.pixels.data());
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
