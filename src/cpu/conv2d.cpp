// Convolution as im2col + GEMM, one image at a time. Per image, the unfolded input `col` is a
// [C_in * k * k, H_out * W_out] matrix (row (ci, kh, kw), column (oh, ow)), so that
//   forward:         y_n[C_out, HW_out]  = w[C_out, K] * col_n
//   backward data:   col_n               = w^T * dy_n, then folded back onto dx_n (col2im)
//   backward filter: dw[C_out, K]       += dy_n * col_n^T, summed over images in order
// A 1x1 convolution with stride 1 and no padding needs no unfolding: col_n is x_n itself.
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

bool is_pointwise(const ConvShape& s) { return s.kernel == 1 && s.stride == 1 && s.pad == 0; }

int64_t unfolded_rows(const ConvShape& s) {
  return static_cast<int64_t>(s.in_channels) * s.kernel * s.kernel;
}

int64_t out_plane(const ConvShape& s) { return static_cast<int64_t>(s.out_h()) * s.out_w(); }

// Scratch that im2col overwrites completely, so it is left uninitialised.
template <typename T>
std::unique_ptr<T[]> unfolded_buffer(const ConvShape& s) {
  return std::unique_ptr<T[]>(new T[unfolded_rows(s) * out_plane(s)]);
}

template <typename T>
void im2col(const ConvShape& s, const T* x, T* col) {
  const int k = s.kernel, out_h = s.out_h(), out_w = s.out_w();
  const int64_t rows = unfolded_rows(s), plane = out_plane(s);
#pragma omp parallel for schedule(static) if (rows * plane >= kMinParallelElements)
  for (int64_t row = 0; row < rows; ++row) {
    const int ci = static_cast<int>(row / (k * k)), kh = static_cast<int>(row / k % k),
              kw = static_cast<int>(row % k);
    const T* x_c = x + static_cast<int64_t>(ci) * s.in_h * s.in_w;
    T* dst = col + row * plane;
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

// Adds every column entry back onto the input position it was copied from. Each thread owns
// whole input channels, so every dx element is summed by one thread in a fixed order.
template <typename T>
void col2im(const ConvShape& s, const T* col, T* dx) {
  const int k = s.kernel, out_h = s.out_h(), out_w = s.out_w();
  const int64_t plane = out_plane(s), in_plane = static_cast<int64_t>(s.in_h) * s.in_w;
  const int64_t work = unfolded_rows(s) * plane;
#pragma omp parallel for schedule(static) if (work >= kMinParallelElements)
  for (int ci = 0; ci < s.in_channels; ++ci) {
    T* dx_c = dx + ci * in_plane;
    for (int64_t i = 0; i < in_plane; ++i) dx_c[i] = T(0);
    for (int kh = 0; kh < k; ++kh) {
      const OutputRange rows_in = inside_outputs(out_h, s.in_h, s.stride, kh - s.pad);
      for (int kw = 0; kw < k; ++kw) {
        const OutputRange cols_in = inside_outputs(out_w, s.in_w, s.stride, kw - s.pad);
        const T* src = col + ((static_cast<int64_t>(ci) * k + kh) * k + kw) * plane;
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

}  // namespace

template <typename T>
void conv2d_forward(const ConvShape& s, const T* x, const T* w, T* y) {
  check_conv(s);
  const int64_t in_image = static_cast<int64_t>(s.in_channels) * s.in_h * s.in_w;
  const int64_t plane = out_plane(s), rows = unfolded_rows(s);
  const auto col = is_pointwise(s) ? nullptr : unfolded_buffer<T>(s);
  for (int n = 0; n < s.batch; ++n) {
    const T* x_n = x + n * in_image;
    if (col) im2col(s, x_n, col.get());
    gemm<T>(false, false, s.out_channels, static_cast<int>(plane), static_cast<int>(rows), T(1),
            w, static_cast<int>(rows), col ? col.get() : x_n, static_cast<int>(plane), T(0),
            y + n * s.out_channels * plane, static_cast<int>(plane));
  }
}

template <typename T>
void conv2d_backward_data(const ConvShape& s, const T* dy, const T* w, T* dx) {
  check_conv(s);
  const int64_t in_image = static_cast<int64_t>(s.in_channels) * s.in_h * s.in_w;
  const int64_t plane = out_plane(s), rows = unfolded_rows(s);
  const auto col = is_pointwise(s) ? nullptr : unfolded_buffer<T>(s);
  for (int n = 0; n < s.batch; ++n) {
    T* dx_n = dx + n * in_image;
    gemm<T>(true, false, static_cast<int>(rows), static_cast<int>(plane), s.out_channels, T(1), w,
            static_cast<int>(rows), dy + n * s.out_channels * plane, static_cast<int>(plane), T(0),
            col ? col.get() : dx_n, static_cast<int>(plane));
    if (col) col2im(s, col.get(), dx_n);
  }
}

template <typename T>
void conv2d_backward_filter(const ConvShape& s, const T* x, const T* dy, T* dw) {
  check_conv(s);
  const int64_t in_image = static_cast<int64_t>(s.in_channels) * s.in_h * s.in_w;
  const int64_t plane = out_plane(s), rows = unfolded_rows(s);
  const auto col = is_pointwise(s) ? nullptr : unfolded_buffer<T>(s);
  for (int n = 0; n < s.batch; ++n) {
    const T* x_n = x + n * in_image;
    if (col) im2col(s, x_n, col.get());
    // The first image overwrites dw, the others add to it.
    gemm<T>(false, true, s.out_channels, static_cast<int>(rows), static_cast<int>(plane), T(1),
            dy + n * s.out_channels * plane, static_cast<int>(plane), col ? col.get() : x_n,
            static_cast<int>(plane), n == 0 ? T(0) : T(1), dw, static_cast<int>(rows));
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
