// Max pooling with PyTorch's choice of maximum, and its backward as a gather: each input sums
// the gradients of the outputs that chose it, in output order, with no atomics, so the result is
// deterministic and equal to the CPU twin's scatter (src/cpu/pooling.cpp) bit for bit.
//
// The choice is kept as the input's place in its window, one byte, where the CPU twin keeps its
// index in the plane (4 bytes): it is kept from forward to backward, and at 224x224, batch 256,
// the stem's max-pool has 51 million outputs.
//
// The forward can also pool relu(BatchNorm(x)) computed on the fly from x (PoolInput), so that
// the stem's BatchNorm output is never stored: at 224x224 that output is the network's largest
// activation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "resnet_ddp/kernel_math/batchnorm.h"
#include "grid_stride.h"
#include "resnet_ddp/kernel_math/layout.h"
#include "resnet_ddp/kernel_math/maxpool.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

unsigned blocks_for(int64_t count) { return grid_stride_blocks(count, kThreads, kMaxBlocks); }

// The channels the NHWC vector kernels take a thread: 16 bytes of values.
template <typename T>
constexpr int kChannelVector = 16 / static_cast<int>(sizeof(T));

// The divisor of an NHWC tensor's flat index into its groups of kChannelVector<T> channels,
// where the vector kernels can take the shape and the pointers (the values read and written
// 16-byte aligned, the argmax places a vector's width), else nothing: the scalar kernels run.
template <typename T>
std::optional<hd::FastDivisor> channel_groups(int channels, const void* read, const void* written,
                                              const uint8_t* argmax) {
  constexpr int V = kChannelVector<T>;
  const auto aligned = [](const void* p, size_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  if (channels % V != 0 || !aligned(read, 16) || !aligned(written, 16) || !aligned(argmax, V))
    return std::nullopt;
  return hd::make_fast_divisor(static_cast<uint32_t>(channels / V));
}

// The inputs of output (oh, ow)'s window, clipped to the input (padding never wins): rows
// h_begin..h_end - 1, columns w_begin..w_end - 1.
struct ClippedWindow {
  int h_begin, h_end, w_begin, w_end;
};
__device__ __forceinline__ ClippedWindow clipped_window(const Window& s, int oh, int ow) {
  const int h0 = oh * s.stride - s.pad, w0 = ow * s.stride - s.pad;
  return {max(h0, 0), min(h0 + s.kernel, s.in_h), max(w0, 0), min(w0 + s.kernel, s.in_w)};
}

// The largest value in the window of output (oh, ow) and its place. The window is clipped to the
// input and scanned row-major; a strictly larger value or any NaN takes over, as in PyTorch.
// value_at(ih * in_w + iw) reads the input at (ih, iw) as a float: exact for float and 16-bit
// values alike.
struct WindowMax {
  float value;
  uint8_t place;
};
template <typename ValueAt>
__device__ __forceinline__ WindowMax window_max(const Window& s, int oh, int ow,
                                                const ValueAt& value_at) {
  const ClippedWindow in = clipped_window(s, oh, ow);
  WindowMax best{-INFINITY, window_place(s, oh, ow, in.h_begin, in.w_begin)};
  for (int ih = in.h_begin; ih < in.h_end; ++ih) {
    for (int iw = in.w_begin; iw < in.w_end; ++iw) {
      const float value = value_at(ih * s.in_w + iw);
      if (value > best.value || isnan(value)) best = {value, window_place(s, oh, ow, ih, iw)};
    }
  }
  return best;
}

// What the forward kernels pool: the stored values themselves, or (Normalized) relu(BatchNorm(x))
// exactly as batchnorm.cu's training output pass computes and rounds it to T.
template <typename T, bool Normalized>
struct PoolInput {
  const T* x;
  BatchNormOnTheFly stats;  // read only when Normalized

  // Channel c's BatchNorm coefficients (Normalized), for value().
  __device__ bn::Normalize<float> coefficients(int64_t c) const {
    bn::Normalize<float> n{};
    if constexpr (Normalized)
      n = bn::make_normalize(stats.save_mean[c], stats.save_invstd[c], stats.gamma[c],
                             stats.beta[c]);
    return n;
  }
  // The float that a stored value v of the channel of `n` stands for.
  __device__ static float value(const bn::Normalize<float>& n, T v) {
    if constexpr (Normalized)
      return bn::stored_relu_output<T>(n, static_cast<float>(v));
    else
      return static_cast<float>(v);
  }
  // value() for channel c's values.
  __device__ auto reader(int64_t c) const {
    const bn::Normalize<float> n = coefficients(c);
    return [n](T v) { return value(n, v); };
  }
};

// `sides` divides by the channels and the output's sides (the backward kernels': the input's).
template <typename T, bool Normalized>
__global__ void maxpool_forward_kernel(Window s, layout::SideDivisors sides, int64_t outputs,
                                       PoolInput<T, Normalized> in, T* y, uint8_t* argmax) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t out = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; out < outputs;
       out += stride) {
    const layout::Coord4 p = layout::nchw_coord(static_cast<uint64_t>(out), sides);
    const int ow = static_cast<int>(p.w), oh = static_cast<int>(p.h);
    const int64_t plane = p.n * sides.C.divisor + p.c;
    const T* x_p = in.x + plane * s.in_h * s.in_w;
    const auto value_of = in.reader(p.c);
    const WindowMax best =
        window_max(s, oh, ow, [&](int32_t index) { return value_of(x_p[index]); });
    y[out] = static_cast<T>(best.value);
    argmax[out] = best.place;
  }
}

template <typename T>
__global__ void maxpool_backward_kernel(Window s, layout::SideDivisors sides, int64_t inputs,
                                        const T* dy, const uint8_t* argmax, T* dx) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t in = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; in < inputs;
       in += stride) {
    const layout::Coord4 p = layout::nchw_coord(static_cast<uint64_t>(in), sides);
    const int64_t plane = p.n * sides.C.divisor + p.c;
    dx[in] = static_cast<T>(stored_input_gradient_nchw(s, dy, argmax, plane, static_cast<int>(p.h),
                                                       static_cast<int>(p.w)));
  }
}

// The NHWC twins of the two kernels above: the same windows, scan order and sums, so the same
// results bit for bit; only where each element lives differs. Consecutive threads take
// consecutive channels of one pixel, so that their loads and stores are coalesced.
template <typename T, bool Normalized>
__global__ void maxpool_forward_nhwc_kernel(Window s, layout::SideDivisors sides, int64_t outputs,
                                            PoolInput<T, Normalized> in, T* y, uint8_t* argmax) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t channels = sides.C.divisor;
  for (int64_t out = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; out < outputs;
       out += stride) {
    const layout::Coord4 p = layout::nhwc_coord(static_cast<uint64_t>(out), sides);
    const T* x_n = in.x + p.n * s.in_h * s.in_w * channels + p.c;
    const auto value_of = in.reader(p.c);
    const WindowMax best =
        window_max(s, static_cast<int>(p.h), static_cast<int>(p.w), [&](int32_t index) {
          return value_of(x_n[static_cast<int64_t>(index) * channels]);
        });
    y[out] = static_cast<T>(best.value);
    argmax[out] = best.place;
  }
}

// What the vector kernels load and store at once: V values of a pixel's adjacent channels (16
// bytes) and their V one-byte places.
template <typename T, int V>
struct alignas(16) ChannelValues {
  T v[V];
};
template <int V>
struct alignas(V) ChannelPlaces {
  uint8_t b[V];
};

// Group g of an NHWC tensor's groups of V adjacent channels: its pixel's flat index, image,
// first channel and place in the plane. `groups` divides by C / V, `sides` by the plane's sides.
struct ChannelGroup {
  int64_t pixel, n, c;
  int h, w;
};
template <int V>
__device__ __forceinline__ ChannelGroup channel_group(int64_t g, const hd::FastDivisor& groups,
                                                      const layout::SideDivisors& sides) {
  const auto pixel = hd::divmod(static_cast<uint64_t>(g), groups);
  const auto w = hd::divmod(pixel.quotient, sides.W), h = hd::divmod(w.quotient, sides.H);
  return {static_cast<int64_t>(pixel.quotient), static_cast<int64_t>(h.quotient),
          static_cast<int64_t>(pixel.remainder) * V, static_cast<int>(h.remainder),
          static_cast<int>(w.remainder)};
}

// The NHWC forward, V adjacent channels of one output pixel a thread (V divides C; x and y
// 16-byte aligned, argmax V-byte aligned): the window is found once for the V channels and each
// of its inputs read in one 16-byte load; each channel keeps its own maximum, scanned in
// window_max's order, so the bits are the scalar kernel's. `groups` divides by C / V, `sides` by
// the output's sides.
template <typename T, int V, bool Normalized>
__global__ void maxpool_forward_nhwc_vector_kernel(Window s, hd::FastDivisor groups,
                                                   layout::SideDivisors sides, int64_t count,
                                                   PoolInput<T, Normalized> in, T* y,
                                                   uint8_t* argmax) {
  using Values = ChannelValues<T, V>;
  using Places = ChannelPlaces<V>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t channels = sides.C.divisor;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < count;
       g += stride) {
    const ChannelGroup at = channel_group<V>(g, groups, sides);
    const int64_t n = at.n, c = at.c;
    const int oh = at.h, ow = at.w;
    const T* x_n = in.x + n * s.in_h * s.in_w * channels + c;
    // The V channels' BatchNorm coefficients (Normalized; unused otherwise).
    bn::Normalize<float> coefficients[V];
#pragma unroll
    for (int k = 0; k < V; ++k) coefficients[k] = in.coefficients(c + k);
    const ClippedWindow window = clipped_window(s, oh, ow);
    float best[V];
    Places places;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      best[k] = -INFINITY;
      places.b[k] = window_place(s, oh, ow, window.h_begin, window.w_begin);
    }
    for (int ih = window.h_begin; ih < window.h_end; ++ih)
      for (int iw = window.w_begin; iw < window.w_end; ++iw) {
        const Values loaded = *reinterpret_cast<const Values*>(
            x_n + (static_cast<int64_t>(ih) * s.in_w + iw) * channels);
        const uint8_t place = window_place(s, oh, ow, ih, iw);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float value = PoolInput<T, Normalized>::value(coefficients[k], loaded.v[k]);
          if (value > best[k] || isnan(value)) {
            best[k] = value;
            places.b[k] = place;
          }
        }
      }
    Values pooled;
#pragma unroll
    for (int k = 0; k < V; ++k) pooled.v[k] = static_cast<T>(best[k]);
    const int64_t out = at.pixel * channels + c;
    *reinterpret_cast<Values*>(y + out) = pooled;
    *reinterpret_cast<Places*>(argmax + out) = places;
  }
}

template <typename T>
__global__ void maxpool_backward_nhwc_kernel(Window s, layout::SideDivisors sides,
                                             int64_t inputs, const T* dy, const uint8_t* argmax,
                                             T* dx) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int channels = static_cast<int>(sides.C.divisor);
  for (int64_t in = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; in < inputs;
       in += stride) {
    const layout::Coord4 p = layout::nhwc_coord(static_cast<uint64_t>(in), sides);
    dx[in] = static_cast<T>(stored_input_gradient_nhwc(s, channels, dy, argmax, p.n, p.c,
                                                       static_cast<int>(p.h),
                                                       static_cast<int>(p.w)));
  }
}

// The same gradient, V adjacent channels of one input pixel a thread (V divides C; dy and dx
// 16-byte aligned, argmax V-byte aligned): the pixel's place and its windows are found once for
// the V channels, and each window's V choices and gradients are loaded in one 16-byte load and
// one V-byte load. Each channel sums its windows in the same order as chosen_gradient, so the
// bits are the scalar kernel's. `groups` divides by C / V, `sides` by the input's sides.
template <typename T, int V>
__global__ void maxpool_backward_nhwc_vector_kernel(Window s, hd::FastDivisor groups,
                                                    layout::SideDivisors sides, int64_t count,
                                                    const T* dy, const uint8_t* argmax, T* dx) {
  using Values = ChannelValues<T, V>;
  using Places = ChannelPlaces<V>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t channels = sides.C.divisor;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < count;
       g += stride) {
    const ChannelGroup at = channel_group<V>(g, groups, sides);
    const int64_t n = at.n, c = at.c;
    const int ih = at.h, iw = at.w;
    float sums[V];
#pragma unroll
    for (int k = 0; k < V; ++k) sums[k] = 0.0f;
    const HoldingWindows held = windows_holding(s, ih, iw);
    for (int oh = held.oh_begin; oh <= held.oh_end; ++oh)
      for (int ow = held.ow_begin; ow <= held.ow_end; ++ow) {
        const int64_t out = layout::nhwc_offset({n, c, oh, ow}, channels, s.out_h, s.out_w);
        const uint8_t place = window_place(s, oh, ow, ih, iw);
        const Places chosen = *reinterpret_cast<const Places*>(argmax + out);
        const Values gradients = *reinterpret_cast<const Values*>(dy + out);
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (chosen.b[k] == place) sums[k] += static_cast<float>(gradients.v[k]);
      }
    Values result;
#pragma unroll
    for (int k = 0; k < V; ++k) result.v[k] = static_cast<T>(sums[k]);
    *reinterpret_cast<Values*>(dx + at.pixel * channels + c) = result;
  }
}

}  // namespace

// The CPU twin's conditions, so that both refuse the same shapes, and the one-byte place's.
Window pool_window(const PoolShape& s) {
  if (s.batch < 1 || s.channels < 1)
    fail("maxpool: batch ", s.batch, " and channels ", s.channels, " must be >= 1");
  // Tested before dividing: C++ rounds a slightly negative (in + 2 * pad - kernel) towards zero
  // and would report one output position.
  if (s.in_h < 1 || s.in_w < 1 || s.kernel < 1 || s.stride < 1 || s.pad < 0 ||
      s.in_h + 2 * s.pad < s.kernel || s.in_w + 2 * s.pad < s.kernel)
    fail("maxpool: a ", s.kernel, "x", s.kernel, " window with stride ", s.stride, " and padding ",
         s.pad, " does not fit a ", s.in_h, "x", s.in_w, " input");
  if (static_cast<int64_t>(s.in_h) * s.in_w > std::numeric_limits<int32_t>::max())
    fail("maxpool: input plane ", s.in_h, "x", s.in_w, " is too large for 32-bit argmax indices");
  if (2 * s.pad > s.kernel)
    fail("maxpool: padding ", s.pad, " is more than half the kernel size ", s.kernel,
         " (PyTorch refuses it too); use padding <= kernel / 2");
  if (s.kernel > 16)
    fail("maxpool: a ", s.kernel, "x", s.kernel, " window has more places than the GPU's one-byte ",
         "argmax holds; windows up to 16x16 are supported");
  return {s.in_h, s.in_w, s.out_h(), s.out_w(), s.kernel, s.stride, s.pad,
          hd::make_fast_divisor(static_cast<uint32_t>(s.stride))};
}

template <typename T, bool Normalized>
void launch_forward(const PoolShape& shape, PoolInput<T, Normalized> in, T* y,
                    uint8_t* argmax, cudaStream_t stream, MemoryFormat format) {
  const Window window = pool_window(shape);
  const int64_t outputs =
      static_cast<int64_t>(shape.batch) * shape.channels * window.out_h * window.out_w;
  const layout::SideDivisors sides =
      layout::side_divisors(shape.channels, window.out_h, window.out_w);
  if (format == MemoryFormat::nhwc) {
    constexpr int V = kChannelVector<T>;
    if (const auto groups = channel_groups<T>(shape.channels, in.x, y, argmax)) {
      maxpool_forward_nhwc_vector_kernel<T, V, Normalized>
          <<<blocks_for(outputs / V), kThreads, 0, stream>>>(window, *groups, sides, outputs / V,
                                                             in, y, argmax);
      RDDP_CUDA_CHECK_LAUNCH("maxpool_forward_nhwc_vector_kernel");
      return;
    }
    maxpool_forward_nhwc_kernel<T, Normalized><<<blocks_for(outputs), kThreads, 0, stream>>>(
        window, sides, outputs, in, y, argmax);
    RDDP_CUDA_CHECK_LAUNCH("maxpool_forward_nhwc_kernel");
    return;
  }
  maxpool_forward_kernel<T, Normalized><<<blocks_for(outputs), kThreads, 0, stream>>>(
      window, sides, outputs, in, y, argmax);
  RDDP_CUDA_CHECK_LAUNCH("maxpool_forward_kernel");
}

template <typename T>
void maxpool_forward(const PoolShape& shape, const T* x, T* y, uint8_t* argmax,
                     cudaStream_t stream, MemoryFormat format) {
  launch_forward(shape, PoolInput<T, false>{x, {}}, y, argmax, stream, format);
}

template <typename T>
void maxpool_forward_of_batchnorm_relu(const PoolShape& shape, const T* x,
                                       const BatchNormOnTheFly& stats, T* y, uint8_t* argmax,
                                       cudaStream_t stream, MemoryFormat format) {
  if (stats.save_mean == nullptr || stats.save_invstd == nullptr || stats.gamma == nullptr ||
      stats.beta == nullptr)
    fail("internal error: maxpool_forward_of_batchnorm_relu was given no BatchNorm statistics ",
         "or parameters; please report this");
  launch_forward(shape, PoolInput<T, true>{x, stats}, y, argmax, stream, format);
}

template <typename T>
void maxpool_backward(const PoolShape& shape, const T* dy, const uint8_t* argmax, T* dx,
                      cudaStream_t stream, MemoryFormat format) {
  const Window window = pool_window(shape);
  const int64_t inputs =
      static_cast<int64_t>(shape.batch) * shape.channels * shape.in_h * shape.in_w;
  const layout::SideDivisors sides = layout::side_divisors(shape.channels, shape.in_h, shape.in_w);
  if (format == MemoryFormat::nhwc) {
    constexpr int V = kChannelVector<T>;
    if (const auto groups = channel_groups<T>(shape.channels, dy, dx, argmax)) {
      maxpool_backward_nhwc_vector_kernel<T, V><<<blocks_for(inputs / V), kThreads, 0, stream>>>(
          window, *groups, sides, inputs / V, dy, argmax, dx);
      RDDP_CUDA_CHECK_LAUNCH("maxpool_backward_nhwc_vector_kernel");
      return;
    }
    maxpool_backward_nhwc_kernel<T><<<blocks_for(inputs), kThreads, 0, stream>>>(
        window, sides, inputs, dy, argmax, dx);
    RDDP_CUDA_CHECK_LAUNCH("maxpool_backward_nhwc_kernel");
    return;
  }
  maxpool_backward_kernel<T><<<blocks_for(inputs), kThreads, 0, stream>>>(window, sides, inputs,
                                                                          dy, argmax, dx);
  RDDP_CUDA_CHECK_LAUNCH("maxpool_backward_kernel");
}

template void maxpool_forward<float>(const PoolShape&, const float*, float*, uint8_t*,
                                     cudaStream_t, MemoryFormat);
template void maxpool_forward_of_batchnorm_relu<float>(const PoolShape&, const float*,
                                                       const BatchNormOnTheFly&, float*, uint8_t*,
                                                       cudaStream_t, MemoryFormat);
template void maxpool_forward_of_batchnorm_relu<__nv_bfloat16>(
    const PoolShape&, const __nv_bfloat16*, const BatchNormOnTheFly&, __nv_bfloat16*,
    uint8_t*, cudaStream_t, MemoryFormat);
template void maxpool_forward_of_batchnorm_relu<__half>(const PoolShape&, const __half*,
                                                        const BatchNormOnTheFly&, __half*,
                                                        uint8_t*, cudaStream_t, MemoryFormat);
template void maxpool_backward<float>(const PoolShape&, const float*, const uint8_t*, float*,
                                      cudaStream_t, MemoryFormat);
template void maxpool_forward<__nv_bfloat16>(const PoolShape&, const __nv_bfloat16*,
                                             __nv_bfloat16*, uint8_t*, cudaStream_t,
                                             MemoryFormat);
template void maxpool_backward<__nv_bfloat16>(const PoolShape&, const __nv_bfloat16*,
                                              const uint8_t*, __nv_bfloat16*, cudaStream_t,
                                              MemoryFormat);
template void maxpool_forward<__half>(const PoolShape&, const __half*, __half*, uint8_t*,
                                      cudaStream_t, MemoryFormat);
template void maxpool_backward<__half>(const PoolShape&, const __half*, const uint8_t*,
                                       __half*, cudaStream_t, MemoryFormat);

}  // namespace rddp::cuda
