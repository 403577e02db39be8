#pragma once
// A flat [N, C, H, W] tensor copied into the layout a kernel reads, and back, through
// kernels/layout_math.h's index maps (tests/unit/test_layout_math.cpp checks those against
// nested loops): for tests whose subject is not the layout itself.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "layout_math.h"

namespace rddp::testing {

// `nchw` as stored in NHWC when `nhwc`, else unchanged.
template <typename T>
std::vector<T> in_layout(const std::vector<T>& nchw, bool nhwc, int channels, int height,
                         int width) {
  if (!nhwc) return nchw;
  std::vector<T> out(nchw.size());
  for (size_t i = 0; i < nchw.size(); ++i)
    out[static_cast<size_t>(layout::nchw_to_nhwc(static_cast<int64_t>(i), channels, height,
                                                 width))] = nchw[i];
  return out;
}

// The inverse: `stored` (NHWC when `nhwc`) back in NCHW.
template <typename T>
std::vector<T> from_layout(const std::vector<T>& stored, bool nhwc, int channels, int height,
                           int width) {
  if (!nhwc) return stored;
  std::vector<T> out(stored.size());
  for (size_t i = 0; i < stored.size(); ++i)
    out[static_cast<size_t>(layout::nhwc_to_nchw(static_cast<int64_t>(i), channels, height,
                                                 width))] = stored[i];
  return out;
}

}  // namespace rddp::testing
