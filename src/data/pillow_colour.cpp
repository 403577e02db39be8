#include "resnet_ddp/data/pillow_colour.h"

namespace rddp::data {

namespace {

// a * b / 255 rounded to nearest, exact for bytes, without a division.
inline unsigned multiply_255(unsigned a, unsigned b) {
  const unsigned t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

inline uint8_t cmyk_channel(unsigned x, unsigned k) {
  return uint8_t(255 - x - k + multiply_255(x, k));
}

}  // namespace

void pillow_rgb_to_grey(const uint8_t* rgb, size_t pixels, uint8_t* grey) {
  for (size_t p = 0; p < pixels; ++p, rgb += 3) grey[p] = pillow_luma(rgb[0], rgb[1], rgb[2]);
}

void pillow_grey_to_rgb(const uint8_t* grey, size_t pixels, uint8_t* rgb) {
  for (size_t p = pixels; p-- > 0;) {
    const uint8_t value = grey[p];
    rgb[3 * p] = rgb[3 * p + 1] = rgb[3 * p + 2] = value;
  }
}

void pillow_cmyk_to_rgb(const uint8_t* cmyk, size_t pixels, uint8_t* rgb) {
  for (size_t p = 0; p < pixels; ++p, cmyk += 4, rgb += 3) {
    const unsigned c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
    rgb[0] = cmyk_channel(c, k);
    rgb[1] = cmyk_channel(m, k);
    rgb[2] = cmyk_channel(y, k);
  }
}

}  // namespace rddp::data
