#pragma once
// The max-pool's arithmetic that its own kernels (maxpool.cu) and the BatchNorm backward that
// gathers its input gradient from the pool's (batchnorm.cu, PooledGradient) share, so that both
// compute that gradient alike, bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "resnet_ddp/kernel_math/fast_divide.h"
#include "resnet_ddp/kernel_math/layout.h"
#include "resnet_ddp/layer_shapes.h"

namespace rddp::cuda {

// The shape without the batch and channels, which only multiply the number of planes; the
// stride also as a divisor (fast_divide.h: the windows an input lies in are found per element).
struct Window {
  int in_h, in_w, out_h, out_w, kernel, stride, pad;
  hd::FastDivisor by_stride;
};

// Input (ih, iw)'s place in the window of output (oh, ow): row-major from the window's corner,
// padding included.
__device__ __forceinline__ uint8_t window_place(const Window& s, int oh, int ow, int ih, int iw) {
  return static_cast<uint8_t>((ih - (oh * s.stride - s.pad)) * s.kernel +
                              (iw - (ow * s.stride - s.pad)));
}

// The window of `shape`, after the checks that both the CPU twin and the one-byte argmax need;
// throws Error naming what does not fit (maxpool.cu).
Window pool_window(const PoolShape& shape);

// The outputs whose windows hold input (ih, iw): oh * stride - pad <= ih < that + kernel, rows
// oh_begin..oh_end and columns ow_begin..ow_end (inclusive; none where a begin passes its end).
struct HoldingWindows {
  int oh_begin, oh_end, ow_begin, ow_end;
};
__device__ __forceinline__ HoldingWindows windows_holding(const Window& s, int ih, int iw) {
  // Every dividend is >= 0 and below 2^31 (the plane's sides are ints).
  const auto over_stride = [&](int n) {
    return static_cast<int>(hd::divide(static_cast<uint32_t>(n), s.by_stride));
  };
  const int h_low = ih + s.pad - s.kernel + 1, w_low = iw + s.pad - s.kernel + 1;
  return {h_low <= 0 ? 0 : over_stride(h_low + s.stride - 1),
          min(over_stride(ih + s.pad), s.out_h - 1),
          w_low <= 0 ? 0 : over_stride(w_low + s.stride - 1),
          min(over_stride(iw + s.pad), s.out_w - 1)};
}

// The gradient of input (ih, iw): the sum, in output order, of dy over the outputs whose windows
// hold it and chose it. output_at(oh, ow) is the output's offset in dy and argmax. Summed in
// float (for 16-bit types: rounded once, by the caller).
template <typename T, typename OutputAt>
__device__ __forceinline__ float chosen_gradient(const Window& s, int ih, int iw, const T* dy,
                                                 const uint8_t* argmax,
                                                 const OutputAt& output_at) {
  const HoldingWindows held = windows_holding(s, ih, iw);
  float sum = 0.0f;
  for (int oh = held.oh_begin; oh <= held.oh_end; ++oh)
    for (int ow = held.ow_begin; ow <= held.ow_end; ++ow) {
      const int64_t out = output_at(oh, ow);
      if (argmax[out] == window_place(s, oh, ow, ih, iw)) sum += static_cast<float>(dy[out]);
    }
  return sum;
}

// What maxpool_backward stores at input (ih, iw) of plane `plane` (n * C + c) in NCHW: the
// chosen gradient rounded to T, widened back to float (exactly).
template <typename T>
__device__ __forceinline__ float stored_input_gradient_nchw(const Window& s, const T* dy,
                                                            const uint8_t* argmax, int64_t plane,
                                                            int ih, int iw) {
  const int64_t base = plane * s.out_h * s.out_w;
  return static_cast<float>(static_cast<T>(chosen_gradient(
      s, ih, iw, dy, argmax,
      [&](int oh, int ow) { return base + static_cast<int64_t>(oh) * s.out_w + ow; })));
}

// The same in NHWC, at input (n, ih, iw) of channel c.
template <typename T>
__device__ __forceinline__ float stored_input_gradient_nhwc(const Window& s, int channels,
                                                            const T* dy, const uint8_t* argmax,
                                                            int64_t n, int64_t c, int ih,
                                                            int iw) {
  return static_cast<float>(static_cast<T>(
      chosen_gradient(s, ih, iw, dy, argmax, [&](int oh, int ow) {
        return layout::nhwc_offset({n, c, oh, ow}, channels, s.out_h, s.out_w);
      })));
}

}  // namespace rddp::cuda
