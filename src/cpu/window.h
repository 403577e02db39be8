#pragma once
// Geometry shared by the sliding-window layers (convolution, max pooling).
#include <algorithm>

#include "resnet_ddp/error.h"

namespace rddp::cpu {

// Refuses a window that does not fit: without the explicit test, C++ division rounds a
// slightly negative (in + 2 * pad - kernel) towards zero and reports one output position.
inline void check_window(const char* layer, int in_h, int in_w, int kernel, int stride, int pad) {
  if (kernel < 1 || stride < 1 || pad < 0)
    fail(layer, ": kernel ", kernel, ", stride ", stride, " and padding ", pad,
         " are invalid: kernel and stride must be >= 1 and padding >= 0");
  if (in_h < 1 || in_w < 1)
    fail(layer, ": input is ", in_h, "x", in_w, ", it must be at least 1x1");
  if (in_h + 2 * pad < kernel || in_w + 2 * pad < kernel)
    fail(layer, ": input ", in_h, "x", in_w, " with padding ", pad, " is smaller than the ", kernel,
         "x", kernel, " window; use a larger input or more padding");
}

// The output positions o in [0, out_size) whose input position o * stride + offset falls
// inside [0, in_size): one contiguous range, so inner loops need no bounds test.
struct OutputRange {
  int begin = 0, end = 0;
};
inline OutputRange inside_outputs(int out_size, int in_size, int stride, int offset) {
  OutputRange range;
  range.begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int last_input = in_size - 1 - offset;  // o * stride <= last_input
  range.end = last_input < 0 ? 0 : std::min(out_size, last_input / stride + 1);
  range.begin = std::min(range.begin, range.end);
  return range;
}

}  // namespace rddp::cpu
