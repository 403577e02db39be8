#pragma once
// Pillow's integer colour conversions, so that an image converted here has the bytes
// torchvision's loader gives it (Image.convert in Pillow 9 and later).
#include <cstddef>
#include <cstdint>

namespace rddp::data {

// "RGB" -> "L": (19595 R + 38470 G + 7471 B + 2^15) >> 16, ITU-R 601 luma in 16-bit fixed point.
inline uint8_t pillow_luma(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

// `pixels` RGB triples to one grey byte each; `grey` may be `rgb` itself (written in order).
void pillow_rgb_to_grey(const uint8_t* rgb, size_t pixels, uint8_t* grey);

// "L" -> "RGB": the grey value three times. `rgb` may start where `grey` does (written from the
// last pixel back, so that no grey value is overwritten before it is read).
void pillow_grey_to_rgb(const uint8_t* grey, size_t pixels, uint8_t* rgb);

// "CMYK" -> "RGB": each of R, G, B is (255 - X)(255 - K) / 255 for X = C, M, Y, rounded as
// Pillow's 8-bit multiply rounds. `rgb` may be `cmyk` itself (written in order).
void pillow_cmyk_to_rgb(const uint8_t* cmyk, size_t pixels, uint8_t* rgb);

}  // namespace rddp::data
