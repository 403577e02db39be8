// Max pooling and global average pooling over NCHW planes; threads split the (n, c) planes.
#include <cmath>
#include <cstdint>
#include <limits>

#include "parallel.h"
#include "resnet_ddp/cpu/layers.h"
#include "window.h"

namespace rddp::cpu {

namespace {

void check_pool(const PoolShape& s) {
  if (s.batch < 1 || s.channels < 1)
    fail("maxpool: batch ", s.batch, " and channels ", s.channels, " must be >= 1");
  check_window("maxpool", s.in_h, s.in_w, s.kernel, s.stride, s.pad);
  if (static_cast<int64_t>(s.in_h) * s.in_w > std::numeric_limits<int32_t>::max())
    fail("maxpool: input plane ", s.in_h, "x", s.in_w, " is too large for 32-bit argmax indices");
  // Every window must then hold at least one real input, as PyTorch also demands.
  if (2 * s.pad > s.kernel)
    fail("maxpool: padding ", s.pad, " is more than half the kernel size ", s.kernel,
         " (PyTorch refuses it too); use padding <= kernel / 2");
}

void check_global(const char* layer, int batch, int channels, int spatial) {
  if (batch < 1 || channels < 1 || spatial < 1)
    fail(layer, ": batch ", batch, ", channels ", channels, " and spatial size ", spatial,
         " must all be >= 1");
}

}  // namespace

template <typename T>
void maxpool_forward(const PoolShape& s, const T* x, T* y, int32_t* argmax) {
  check_pool(s);
  const int out_h = s.out_h(), out_w = s.out_w();
  const int64_t planes = static_cast<int64_t>(s.batch) * s.channels;
  const int64_t in_plane = static_cast<int64_t>(s.in_h) * s.in_w;
  const int64_t out_plane = static_cast<int64_t>(out_h) * out_w;
#pragma omp parallel for schedule(static) if (planes * in_plane >= kMinParallelElements)
  for (int64_t p = 0; p < planes; ++p) {
    const T* x_p = x + p * in_plane;
    for (int oh = 0; oh < out_h; ++oh) {
      // Padded positions are skipped rather than read as -inf: same result, and the window
      // is clipped to the input once per row instead of tested per element.
      const int h0 = oh * s.stride - s.pad;
      const int h_begin = h0 < 0 ? 0 : h0, h_end = h0 + s.kernel < s.in_h ? h0 + s.kernel : s.in_h;
      for (int ow = 0; ow < out_w; ++ow) {
        const int w0 = ow * s.stride - s.pad;
        const int w_begin = w0 < 0 ? 0 : w0,
                  w_end = w0 + s.kernel < s.in_w ? w0 + s.kernel : s.in_w;
        // PyTorch's rule: scan the window row-major; a strictly larger value or any NaN takes
        // over. Ties keep the first maximum; NaN propagates (the last NaN's index is kept).
        int32_t best_index = h_begin * s.in_w + w_begin;
        T best = -std::numeric_limits<T>::infinity();
        for (int ih = h_begin; ih < h_end; ++ih) {
          for (int iw = w_begin; iw < w_end; ++iw) {
            const int32_t index = ih * s.in_w + iw;
            const T value = x_p[index];
            if (value > best || std::isnan(value)) {
              best = value;
              best_index = index;
            }
          }
        }
        const int64_t out = p * out_plane + static_cast<int64_t>(oh) * out_w + ow;
        y[out] = best;
        argmax[out] = best_index;
      }
    }
  }
}

template <typename T>
void maxpool_backward(const PoolShape& s, const T* dy, const int32_t* argmax, T* dx) {
  check_pool(s);
  const int64_t planes = static_cast<int64_t>(s.batch) * s.channels;
  const int64_t in_plane = static_cast<int64_t>(s.in_h) * s.in_w;
  const int64_t out_plane = static_cast<int64_t>(s.out_h()) * s.out_w();
#pragma omp parallel for schedule(static) if (planes * in_plane >= kMinParallelElements)
  for (int64_t p = 0; p < planes; ++p) {
    T* dx_p = dx + p * in_plane;
    for (int64_t i = 0; i < in_plane; ++i) dx_p[i] = T(0);
    // Overlapping windows may pick the same input: their gradients add up, in output order.
    for (int64_t out = p * out_plane; out < (p + 1) * out_plane; ++out)
      dx_p[argmax[out]] += dy[out];
  }
}

template <typename T>
void global_avgpool_forward(int batch, int channels, int spatial, const T* x, T* y) {
  check_global("global_avgpool", batch, channels, spatial);
  const int64_t planes = static_cast<int64_t>(batch) * channels;
#pragma omp parallel for schedule(static) if (planes * spatial >= kMinParallelElements)
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0.0;
    for (int i = 0; i < spatial; ++i) sum += x[p * spatial + i];
    y[p] = static_cast<T>(sum / spatial);
  }
}

template <typename T>
void global_avgpool_backward(int batch, int channels, int spatial, const T* dy, T* dx) {
  check_global("global_avgpool", batch, channels, spatial);
  const int64_t planes = static_cast<int64_t>(batch) * channels;
#pragma omp parallel for schedule(static) if (planes * spatial >= kMinParallelElements)
  for (int64_t p = 0; p < planes; ++p) {
    const T share = static_cast<T>(static_cast<double>(dy[p]) / spatial);
    for (int i = 0; i < spatial; ++i) dx[p * spatial + i] = share;
  }
}

#define RDDP_INSTANTIATE_POOLING(T)                                                      \
  template void maxpool_forward<T>(const PoolShape&, const T*, T*, int32_t*);            \
  template void maxpool_backward<T>(const PoolShape&, const T*, const int32_t*, T*);     \
  template void global_avgpool_forward<T>(int, int, int, const T*, T*);                  \
  template void global_avgpool_backward<T>(int, int, int, const T*, T*);
RDDP_INSTANTIATE_POOLING(float)
RDDP_INSTANTIATE_POOLING(double)
#undef RDDP_INSTANTIATE_POOLING

}  // namespace rddp::cpu
