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

// Both passes run through this one, whose every loop is contiguous, so that it is the only
// place that must be fast; with AVX2 it is three times as fast as with x86-64's baseline SSE2,
// so it is compiled for both and the CPU picks at load time.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RDDP_WITH_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define RDDP_WITH_AVX2_CLONE
#endif

// Along y; `row_shift` is subtracted from the rows the coefficients name. Each output row adds
// its input rows one whole row at a time into a row of sums (contiguous, so the compiler's
// vector instructions do it), the same integers as Pillow's per-byte loop.
RDDP_WITH_AVX2_CLONE
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

// out(x, y) = in(row_begin + y, x) for y < rows: the pixels of those rows, transposed whole
// (channels stay together). A block of rows at a time, so that each x writes one contiguous run.
template <int Channels>
void transpose_pixels(const Image& in, int row_begin, int rows, Image& out) {
  const int channels = Channels > 0 ? Channels : in.channels;
  constexpr int kBlock = 16;
  for (int y0 = 0; y0 < rows; y0 += kBlock) {
    const int block = std::min(kBlock, rows - y0);
    const uint8_t* source[kBlock];
    for (int b = 0; b < block; ++b) source[b] = in.at(row_begin + y0 + b, 0);
    for (int x = 0; x < in.width; ++x) {
      uint8_t* target = out.pixels.data() + (size_t(x) * rows + y0) * channels;
      const size_t column = size_t(x) * channels;
      for (int b = 0; b < block; ++b)
        for (int ch = 0; ch < channels; ++ch) target[b * channels + ch] = source[b][column + ch];
    }
  }
}

void transpose(const Image& in, int row_begin, int rows, Image& out) {
  switch (in.channels) {
    case 1: return transpose_pixels<1>(in, row_begin, rows, out);
    case 3: return transpose_pixels<3>(in, row_begin, rows, out);
    default: return transpose_pixels<0>(in, row_begin, rows, out);
  }
}

// Rows [row_begin, row_begin + out.height) of `in`, resampled along x: transposed, resampled
// along what are then rows by the vertical pass, and transposed back. Along x a pixel's taps
// are a few bytes apart and differ from pixel to pixel, which no vector instruction handles
// well; the two transposes cost less than the scalar loop they replace (3.5 times as fast in
// all, measured in bench/decode_bench). The sums are the same integers.
void resample_horizontal(const Image& in, int row_begin, const Coefficients& c, Image& out) {
  const int rows = out.height;
  Image columns(in.width, rows, in.channels);
  transpose(in, row_begin, rows, columns);
  Image resampled(out.width, rows, in.channels);
  resample_vertical(columns, 0, c, resampled);
  transpose(resampled, 0, out.width, out);
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
