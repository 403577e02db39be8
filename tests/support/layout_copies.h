#pragma once
// A flat [N, C, H, W] tensor copied into the layout a kernel reads, and back: through
// include/resnet_ddp/kernel_math/layout.h's index maps (tests/unit/test_layout_math.cpp checks those against
// nested loops) for tests whose subject is not the layout itself, and by nested loops for
// those whose subject it is.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "resnet_ddp/kernel_math/layout.h"
#include "support/parallel_loops.h"

namespace rddp::testing {

// `nchw` as stored in NHWC when `nhwc`, else unchanged.
template <typename T>
std::vector<T> in_layout(const std::vector<T>& nchw, bool nhwc, int channels, int height,
                         int width) {
  if (!nhwc) return nchw;
  std::vector<T> out(nchw.size());
  const auto count = static_cast<std::ptrdiff_t>(nchw.size());
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i)
    out[static_cast<size_t>(layout::nchw_to_nhwc(i, channels, height, width))] =
        nchw[static_cast<size_t>(i)];
  return out;
}

// The inverse: `stored` (NHWC when `nhwc`) back in NCHW.
template <typename T>
std::vector<T> from_layout(const std::vector<T>& stored, bool nhwc, int channels, int height,
                           int width) {
  if (!nhwc) return stored;
  std::vector<T> out(stored.size());
  const auto count = static_cast<std::ptrdiff_t>(stored.size());
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::ptrdiff_t i = 0; i < count; ++i)
    out[static_cast<size_t>(layout::nhwc_to_nchw(i, channels, height, width))] =
        stored[static_cast<size_t>(i)];
  return out;
}

// [N, C, H, W] -> [N, H, W, C] and back by nested loops, without kernel_math/layout.h: the reference
// for the kernels that permute (kernels/layout.cu).
template <typename T>
std::vector<T> nchw_to_nhwc(const std::vector<T>& x, int n, int c, int h, int w) {
  std::vector<T> y(x.size());
  for (int in = 0; in < n; ++in)
    for (int ic = 0; ic < c; ++ic)
      for (int ih = 0; ih < h; ++ih)
        for (int iw = 0; iw < w; ++iw)
          y[((static_cast<size_t>(in) * h + ih) * w + iw) * c + ic] =
              x[((static_cast<size_t>(in) * c + ic) * h + ih) * w + iw];
  return y;
}
template <typename T>
std::vector<T> nhwc_to_nchw(const std::vector<T>& y, int n, int c, int h, int w) {
  std::vector<T> x(y.size());
  for (int in = 0; in < n; ++in)
    for (int ic = 0; ic < c; ++ic)
      for (int ih = 0; ih < h; ++ih)
        for (int iw = 0; iw < w; ++iw)
          x[((static_cast<size_t>(in) * c + ic) * h + ih) * w + iw] =
              y[((static_cast<size_t>(in) * h + ih) * w + iw) * c + ic];
  return x;
}

}  // namespace rddp::testing
