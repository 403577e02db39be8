// Pillow's libImaging/Resample.c (precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal_8bpc / Vertical_8bpc, ImagingResampleInner) for the bilinear
// filter and the whole image as the source box, which is what Image.resize(size, BILINEAR)
// does. Every step that rounds is kept as Pillow has it, so results match byte for byte.
#include "resnet_ddp/data/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

// Fixed-point weights: 32 bits less 8 for the pixel and 2 for sign and overflow headroom.
constexpr int kPrecisionBits = 32 - 8 - 2;

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// For each output position: the first input position it reads, how many, and the weights.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // out_size x ksize
};

Coefficients precompute(int in_size, int out_size) {
  const double scale = double(in_size) / out_size;
  const double filter_scale = scale < 1.0 ? 1.0 : scale;  // widen the filter when shrinking
  const double support = 1.0 * filter_scale;              // the triangle's support is 1
  Coefficients c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.first.resize(size_t(out_size));
  c.count.resize(size_t(out_size));
  c.weights.assign(size_t(out_size) * c.ksize, 0);
  std::vector<double> k(size_t(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double inverse = 1.0 / filter_scale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double total = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[size_t(x)] = triangle((x + xmin - center + 0.5) * inverse);
      total += k[size_t(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      if (total != 0.0) k[size_t(x)] /= total;
      // The triangle is never negative, so Pillow's rounding is +0.5 and truncate.
      c.weights[size_t(xx) * c.ksize + x] = int32_t(0.5 + k[size_t(x)] * (1 << kPrecisionBits));
    }
    c.first[size_t(xx)] = xmin;
    c.count[size_t(xx)] = xmax;
  }
  return c;
}

uint8_t clip8(int32_t value) {
  const int32_t shifted = value >> kPrecisionBits;
  return uint8_t(shifted < 0 ? 0 : shifted > 255 ? 255 : shifted);
}

// Rows [row_begin, row_begin + out.height) of `in`, resampled along x. Channels is a template
// argument for grey and RGB images, so that a pixel's sums are kept side by side in registers
// over one walk of its taps; the sums are the same integers as Pillow's in any order.
template <int Channels>
void resample_horizontal_pixels(const Image& in, int row_begin, const Coefficients& c,
                                Image& out) {
  const int channels = Channels > 0 ? Channels : in.channels;
  for (int y = 0; y < out.height; ++y) {
    for (int xx = 0; xx < out.width; ++xx) {
      const int32_t* k = c.weights.data() + size_t(xx) * c.ksize;
      const uint8_t* source = in.at(row_begin + y, c.first[size_t(xx)]);
      uint8_t* target = out.at(y, xx);
      const int count = c.count[size_t(xx)];
      if constexpr (Channels > 0) {
        int32_t sum[Channels];
        for (int ch = 0; ch < Channels; ++ch) sum[ch] = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < count; ++x)
          for (int ch = 0; ch < Channels; ++ch) sum[ch] += source[x * Channels + ch] * k[x];
        for (int ch = 0; ch < Channels; ++ch) target[ch] = clip8(sum[ch]);
      } else {
        for (int ch = 0; ch < channels; ++ch) {
          int32_t sum = 1 << (kPrecisionBits - 1);
          for (int x = 0; x < count; ++x) sum += source[x * channels + ch] * k[x];
          target[ch] = clip8(sum);
        }
      }
    }
  }
}

void resample_horizontal(const Image& in, int row_begin, const Coefficients& c, Image& out) {
  switch (in.channels) {
    case 1: return resample_horizontal_pixels<1>(in, row_begin, c, out);
    case 3: return resample_horizontal_pixels<3>(in, row_begin, c, out);
    default: return resample_horizontal_pixels<0>(in, row_begin, c, out);
  }
}

// Along y; `row_shift` is subtracted from the rows the coefficients name. Each output row adds
// its input rows one whole row at a time into a row of sums (contiguous, so the compiler's
// vector instructions do it), the same integers as Pillow's per-byte loop.
void resample_vertical(const Image& in, int row_shift, const Coefficients& c, Image& out) {
  const int channels = in.channels;
  const size_t row_stride = size_t(in.width) * channels;
  std::vector<int32_t> sums(row_stride);
  for (int yy = 0; yy < out.height; ++yy) {
    const int32_t* k = c.weights.data() + size_t(yy) * c.ksize;
    const uint8_t* top = in.at(c.first[size_t(yy)] - row_shift, 0);
    std::fill(sums.begin(), sums.end(), int32_t(1) << (kPrecisionBits - 1));
    int32_t* sum = sums.data();
    for (int y = 0; y < c.count[size_t(yy)]; ++y) {
      const uint8_t* row = top + size_t(y) * row_stride;
      const int32_t weight = k[y];
      for (size_t i = 0; i < row_stride; ++i) sum[i] += row[i] * weight;
    }
    uint8_t* target = out.at(yy, 0);
    for (size_t i = 0; i < row_stride; ++i) target[i] = clip8(sum[i]);
  }
}

}  // namespace

Image resize_bilinear(const Image& image, int out_height, int out_width) {
  if (out_height < 1 || out_width < 1 || image.height < 1 || image.width < 1)
    fail("cannot resize a ", image.width, "x", image.height, " image to ", out_width, "x",
         out_height);
  const bool horizontal = out_width != image.width;
  const bool vertical = out_height != image.height;
  if (!horizontal && !vertical) return image;
  const Coefficients along_x = precompute(image.width, out_width);
  const Coefficients along_y = precompute(image.height, out_height);
  if (!horizontal) {
    Image out(out_height, out_width, image.channels);
    resample_vertical(image, 0, along_y, out);
    return out;
  }
  // Only the rows the vertical pass will read go through the horizontal one.
  const int row_begin = along_y.first.front();
  const int row_end = along_y.first.back() + along_y.count.back();
  Image between(row_end - row_begin, out_width, image.channels);
  resample_horizontal(image, row_begin, along_x, between);
  if (!vertical) return between;
  Image out(out_height, out_width, image.channels);
  resample_vertical(between, row_begin, along_y, out);
  return out;
}

}  // namespace rddp::data
