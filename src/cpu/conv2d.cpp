// Convolution as im2col + GEMM. The unfolded input of one image, `col`, is a
// [C_in * k * k, H_out * W_out] matrix (row (ci, kh, kw), column (oh, ow)), so that
//   forward:         y_n[C_out, HW_out]  = w[C_out, K] * col_n
//   backward data:   col_n               = w^T * dy_n, then folded back onto dx_n (col2im)
//   backward filter: dw[C_out, K]       += dy_n * col_n^T
// Deep layers have small planes (7x7, or 2x2 at 64x64 input), where one image gives the GEMM
// too few columns to pay for packing the weights; there a chunk of images is unfolded side by
// side into one wider matrix, with dy and y moved between NCHW and that layout. The chunk
// size depends on the shape alone, not on the thread count, so the summation order and the
// result never change from run to run. A 1x1 convolution with stride 1 and no padding, one
// image per chunk, needs no unfolding at all: col_n is x_n itself.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "resnet_ddp/cpu/gemm.h"
#include "resnet_ddp/cpu/layers.h"
#include "parallel.h"
#include "window.h"

namespace rddp::cpu {

namespace {

void check_conv(const ConvShape& s) {
  if (s.batch < 1 || s.in_channels < 1 || s.out_channels < 1)
    fail("conv2d: batch ", s.batch, ", in_channels ", s.in_channels, " and out_channels ",
         s.out_channels, " must all be >= 1");
  check_window("conv2d", s.in_h, s.in_w, s.kernel, s.stride, s.pad);
}

int64_t unfolded_rows(const ConvShape& s) {
  return static_cast<int64_t>(s.in_channels) * s.kernel * s.kernel;
}

int64_t out_plane(const ConvShape& s) { return static_cast<int64_t>(s.out_h()) * s.out_w(); }

int64_t in_image(const ConvShape& s) {
  return static_cast<int64_t>(s.in_channels) * s.in_h * s.in_w;
}

// Writes the unfolded image into columns [0, plane) of a matrix with row stride `ld`.
template <typename T>
void im2col(const ConvShape& s, const T* x, T* col, int64_t ld) {
  const int k = s.kernel, out_h = s.out_h(), out_w = s.out_w();
  const int64_t rows = unfolded_rows(s);
#pragma omp parallel for schedule(static) if (rows * out_plane(s) >= kMinParallelElements)
  for (int64_t row = 0; row < rows; ++row) {
    const int ci = static_cast<int>(row / (k * k)), kh = static_cast<int>(row / k % k),
              kw = static_cast<int>(row % k);
    const T* x_c = x + static_cast<int64_t>(ci) * s.in_h * s.in_w;
    T* dst = col + row * ld;
    const OutputRange rows_in = inside_outputs(out_h, s.in_h, s.stride, kh - s.pad);
    const OutputRange cols_in = inside_outputs(out_w, s.in_w, s.stride, kw - s.pad);
    for (int oh = 0; oh < out_h; ++oh, dst += out_w) {
      if (oh < rows_in.begin || oh >= rows_in.end) {
        for (int ow = 0; ow < out_w; ++ow) dst[ow] = T(0);
        continue;
      }
      // Offset of output column 0's input; it may be negative (padding), so index from x_c.
      const int64_t base = static_cast<int64_t>(oh * s.stride + kh - s.pad) * s.in_w + kw - s.pad;
      for (int ow = 0; ow < cols_in.begin; ++ow) dst[ow] = T(0);
      for (int ow = cols_in.begin; ow < cols_in.end; ++ow) dst[ow] = x_c[base + ow * s.stride];
      for (int ow = cols_in.end; ow < out_w; ++ow) dst[ow] = T(0);
    }
  }
}

// Overwrites dx with the sum of every column entry folded back onto the input position it
// was copied from. Each thread owns whole input channels, so every dx element is summed by
// one thread in a fixed order.
template <typename T>
void col2im(const ConvShape& s, const T* col, int64_t ld, T* dx) {
  const int k = s.kernel, out_h = s.out_h(), out_w = s.out_w();
  const int64_t in_plane = static_cast<int64_t>(s.in_h) * s.in_w;
  const int64_t work = unfolded_rows(s) * out_plane(s);
#pragma omp parallel for schedule(static) if (work >= kMinParallelElements)
  for (int ci = 0; ci < s.in_channels; ++ci) {
    T* dx_c = dx + ci * in_plane;
    for (int64_t i = 0; i < in_plane; ++i) dx_c[i] = T(0);
    for (int kh = 0; kh < k; ++kh) {
      const OutputRange rows_in = inside_outputs(out_h, s.in_h, s.stride, kh - s.pad);
      for (int kw = 0; kw < k; ++kw) {
        const OutputRange cols_in = inside_outputs(out_w, s.in_w, s.stride, kw - s.pad);
        const T* src = col + ((static_cast<int64_t>(ci) * k + kh) * k + kw) * ld;
        for (int oh = rows_in.begin; oh < rows_in.end; ++oh) {
          const int64_t base =
              static_cast<int64_t>(oh * s.stride + kh - s.pad) * s.in_w + kw - s.pad;
          const T* src_row = src + static_cast<int64_t>(oh) * out_w;
          for (int ow = cols_in.begin; ow < cols_in.end; ++ow)
            dx_c[base + ow * s.stride] += src_row[ow];
        }
      }
    }
  }
}

// How a batch is cut into chunks of images that share one GEMM, and the scratch they need.
template <typename T>
struct ConvPlan {
  explicit ConvPlan(const ConvShape& shape) : s(shape) {
    check_conv(s);
    plane = out_plane(s);
    rows = unfolded_rows(s);
    // At least kTargetColumns columns per GEMM where the batch allows: a few micro-kernel
    // widths, and enough that packing the weights is a small part of the work.
    constexpr int64_t kTargetColumns = 256;
    chunk = static_cast<int>(std::min<int64_t>(s.batch, (kTargetColumns + plane - 1) / plane));
    ld = chunk * plane;
    direct = chunk == 1 && s.kernel == 1 && s.stride == 1 && s.pad == 0;
  }

  // Scratch that is overwritten completely before it is read, so it is left uninitialised.
  static std::unique_ptr<T[]> scratch(int64_t elements) {
    return std::unique_ptr<T[]>(new T[elements]);
  }
  std::unique_ptr<T[]> unfolded() const { return direct ? nullptr : scratch(rows * ld); }
  // An output-side [C_out, chunk * plane] matrix; one image is already laid out so.
  std::unique_ptr<T[]> gathered() const {
    return chunk == 1 ? nullptr : scratch(s.out_channels * ld);
  }

  // Between `images` consecutive NCHW output images starting at `nchw` and the
  // [C_out, images * plane] layout with row stride ld.
  void gather(const T* nchw, int images, T* chunked) const {
    for (int g = 0; g < images; ++g)
      for (int c = 0; c < s.out_channels; ++c)
        std::copy_n(nchw + (static_cast<int64_t>(g) * s.out_channels + c) * plane, plane,
                    chunked + c * ld + g * plane);
  }
  // The GEMM operands of images [n0, n0 + images): the unfolded input (in col, or the input
  // itself for a direct convolution), and the output gradient (gathered into `chunked` where
  // a chunk has several images, or dy itself).
  const T* columns(const T* x, int n0, int images, T* col) const {
    if (!col) return x + n0 * in_image(s);
    for (int g = 0; g < images; ++g)
      im2col(s, x + (n0 + g) * in_image(s), col + g * plane, ld);
    return col;
  }
  const T* upstream(const T* dy, int n0, int images, T* chunked) const {
    const T* first = dy + n0 * s.out_channels * plane;
    if (!chunked) return first;
    gather(first, images, chunked);
    return chunked;
  }
  void scatter(const T* chunked, int images, T* nchw) const {
    for (int g = 0; g < images; ++g)
      for (int c = 0; c < s.out_channels; ++c)
        std::copy_n(chunked + c * ld + g * plane, plane,
                    nchw + (static_cast<int64_t>(g) * s.out_channels + c) * plane);
  }

  const ConvShape& s;
  int64_t plane = 0, rows = 0, ld = 0;
  int chunk = 1;
  bool direct = false;  // col is the input image itself
};

}  // namespace

template <typename T>
void conv2d_forward(const ConvShape& s, const T* x, const T* w, T* y) {
  const ConvPlan<T> plan(s);
  const auto col = plan.unfolded();
  const auto out = plan.gathered();
  const int64_t out_image = s.out_channels * plan.plane;
  for (int n0 = 0; n0 < s.batch; n0 += plan.chunk) {
    const int images = std::min(plan.chunk, s.batch - n0);
    const T* unfolded = plan.columns(x, n0, images, col.get());
    T* product = out ? out.get() : y + n0 * out_image;
    gemm<T>(false, false, s.out_channels, static_cast<int>(images * plan.plane),
            static_cast<int>(plan.rows), T(1), w, static_cast<int>(plan.rows), unfolded,
            static_cast<int>(plan.ld), T(0), product, static_cast<int>(plan.ld));
    if (out) plan.scatter(out.get(), images, y + n0 * out_image);
  }
}

template <typename T>
void conv2d_backward_data(const ConvShape& s, const T* dy, const T* w, T* dx) {
  const ConvPlan<T> plan(s);
  const auto col = plan.unfolded();
  const auto dy_chunk = plan.gathered();
  for (int n0 = 0; n0 < s.batch; n0 += plan.chunk) {
    const int images = std::min(plan.chunk, s.batch - n0);
    const T* upstream = plan.upstream(dy, n0, images, dy_chunk.get());
    T* unfolded = col ? col.get() : dx + n0 * in_image(s);
    gemm<T>(true, false, static_cast<int>(plan.rows), static_cast<int>(images * plan.plane),
            s.out_channels, T(1), w, static_cast<int>(plan.rows), upstream,
            static_cast<int>(plan.ld), T(0), unfolded, static_cast<int>(plan.ld));
    for (int g = 0; g < images && col; ++g)
      col2im(s, col.get() + g * plan.plane, plan.ld, dx + (n0 + g) * in_image(s));
  }
}

template <typename T>
void conv2d_backward_filter(const ConvShape& s, const T* x, const T* dy, T* dw) {
  const ConvPlan<T> plan(s);
  const auto col = plan.unfolded();
  const auto dy_chunk = plan.gathered();
  for (int n0 = 0; n0 < s.batch; n0 += plan.chunk) {
    const int images = std::min(plan.chunk, s.batch - n0);
    const T* unfolded = plan.columns(x, n0, images, col.get());
    const T* upstream = plan.upstream(dy, n0, images, dy_chunk.get());
    // The first chunk overwrites dw, the others add to it, in batch order.
    gemm<T>(false, true, s.out_channels, static_cast<int>(plan.rows),
            static_cast<int>(images * plan.plane), T(1), upstream, static_cast<int>(plan.ld),
            unfolded, static_cast<int>(plan.ld), n0 == 0 ? T(0) : T(1), dw,
            static_cast<int>(plan.rows));
  }
}

#define RDDP_INSTANTIATE_CONV2D(T)                                               \
  template void conv2d_forward<T>(const ConvShape&, const T*, const T*, T*);     \
  template void conv2d_backward_data<T>(const ConvShape&, const T*, const T*, T*); \
  template void conv2d_backward_filter<T>(const ConvShape&, const T*, const T*, T*);
RDDP_INSTANTIATE_CONV2D(float)
RDDP_INSTANTIATE_CONV2D(double)
#undef RDDP_INSTANTIATE_CONV2D

}  // namespace rddp::cpu
