// Memory-format conversions of the NHWC executor, each fused with the type conversion that
// has to happen at the same place anyway, so that a permutation never costs a pass of its own:
// the network's float NCHW input becomes the activations' type and NHWC in one pass (where the
// bfloat16 executor converts it anyway); the float OIHW master weights become the convolutions'
// OHWI copy in the activations' type in one launch for all convolutions; and a weight gradient
// cuDNN wrote in OHWI is widened (bfloat16) or copied (float) into the OIHW float gradient in
// the pass that widens it under NCHW. The index maths is include/resnet_ddp/kernel_math/layout.h, tested on the
// CPU; values go through float, which is exact for float and bfloat16 and rounds to nearest
// even when narrowing, like convert() (elementwise.cu). The uint8 HWC pixels a batch is uploaded
// as become the network's input the same way, normalised on the way (kernel_math/pixel.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "grid_stride.h"
#include "resnet_ddp/kernel_math/layout.h"
#include "resnet_ddp/kernel_math/pixel.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

unsigned blocks_for(int64_t count) { return grid_stride_blocks(count, kThreads, kMaxBlocks); }

// Threads walk the destination in order, so that the writes are coalesced; the reads gather.
// (The tensors here are at most a few MB; a tiled transpose would buy little.)
template <typename From, typename To>
__global__ void nchw_to_nhwc_kernel(int64_t count, int C, layout::SideDivisors sides,
                                    const From* x, To* y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t H = sides.H.divisor, W = sides.W.divisor;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const layout::Coord4 at = layout::nhwc_coord(static_cast<uint64_t>(i), sides);
    y[i] = static_cast<To>(static_cast<float>(x[layout::nchw_offset(at, C, H, W)]));
  }
}

// The same walk over the destination; a pixel's channels are adjacent in the source, whose
// (N, H, W, C) layout is NHWC's, so under NHWC the two indices are one.
template <bool ToNhwc, typename To>
__global__ void pixels_to_input_kernel(int64_t count, int C, layout::SideDivisors sides,
                                       const uint8_t* hwc, const float* mean_stddev, To* y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    int64_t from = 0;
    int c = 0;
    if (ToNhwc) {
      c = static_cast<int>(hd::divmod(static_cast<uint64_t>(i), sides.C).remainder);
      from = i;
    } else {
      const layout::Coord4 p = layout::nchw_coord(static_cast<uint64_t>(i), sides);
      from = layout::nhwc_offset(p, C, sides.H.divisor, sides.W.divisor);
      c = static_cast<int>(p.c);
    }
    y[i] = static_cast<To>(pixel::normalized(hwc[from], mean_stddev[c], mean_stddev[C + c]));
  }
}

// Output channel o's weights are I*K*K contiguous elements in both layouts: [I][KK] in OIHW
// and [KK][I] in OHWI, a transpose within the slice. One block moves one slice, a chunk of whole
// input channels at a time through shared memory, reading the chunk in the source's order and
// writing it in the destination's, so that both sides are coalesced. (Before, each thread
// gathered one element, 36 bytes from its neighbour's for a 3x3 weight, and the OHWI copy ran
// on a grid sized for the largest weight in every row of convolutions: 152 us a launch for
// ResNet-18 on an H100,
// bench/results/2026-11-22-H100-d6b480e/nhwc-batchnorm-profile-H100-2026-11-22.md.)
constexpr int kWeightTile = 4096;  // floats: 16 KiB, a 3x3 slice of 455 input channels

template <bool ToOhwi, typename From, typename To>
__device__ void transpose_weight_slice(const From* from, To* to, int in, int kernel) {
  const int taps = kernel * kernel;
  if (taps > kWeightTile) {  // not one input channel fits the tile: gather, as the maths says
    const int64_t slice = static_cast<int64_t>(in) * taps;
    for (int64_t i = threadIdx.x; i < slice; i += blockDim.x) {
      // OIHW index i is channel i / taps at tap i % taps; OHWI holds it at tap * in + channel.
      const int64_t ohwi = i % taps * in + i / taps;
      if (ToOhwi)
        to[ohwi] = static_cast<To>(static_cast<float>(from[i]));
      else
        to[i] = static_cast<To>(static_cast<float>(from[ohwi]));
    }
    return;
  }
  __shared__ float tile[kWeightTile];  // the chunk as [channel][tap], OIHW's order
  // Equal chunks, so that the strided side runs in stretches as long as they can be.
  const int chunks = (in + kWeightTile / taps - 1) / (kWeightTile / taps);
  const int width = (in + chunks - 1) / chunks;
  for (int first = 0; first < in; first += width) {
    const int channels = min(width, in - first);
    const int count = channels * taps;
    const int64_t oihw_first = static_cast<int64_t>(first) * taps;
    // j walks the chunk in the source's order, then in the destination's: OIHW's is the tile's,
    // OHWI's is [tap][channel], each tap's channels a run of `channels` in a row of `in`.
    for (int j = threadIdx.x; j < count; j += blockDim.x) {
      if (ToOhwi) {
        tile[j] = static_cast<float>(from[oihw_first + j]);
      } else {
        const int tap = j / channels, channel = j - tap * channels;
        tile[channel * taps + tap] =
            static_cast<float>(from[static_cast<int64_t>(tap) * in + first + channel]);
      }
    }
    __syncthreads();
    for (int j = threadIdx.x; j < count; j += blockDim.x) {
      if (ToOhwi) {
        const int tap = j / channels, channel = j - tap * channels;
        to[static_cast<int64_t>(tap) * in + first + channel] =
            static_cast<To>(tile[channel * taps + tap]);
      } else {
        to[oihw_first + j] = static_cast<To>(tile[j]);
      }
    }
    __syncthreads();  // the next chunk overwrites the tile
  }
}

// blockIdx.x is the output channel, blockIdx.y the convolution.
template <typename To>
__global__ void __launch_bounds__(kThreads)
    weights_to_ohwi_kernel(const WeightPermutation* table, const float* oihw, To* ohwi) {
  const WeightPermutation p = table[blockIdx.y];
  if (static_cast<int>(blockIdx.x) >= p.out_channels) return;
  const int64_t slice = static_cast<int64_t>(p.in_channels) * p.kernel * p.kernel * blockIdx.x;
  transpose_weight_slice<true>(oihw + p.param_offset + slice, ohwi + p.copy_offset + slice,
                               p.in_channels, p.kernel);
}

// blockIdx.x is the output channel.
template <typename From>
__global__ void __launch_bounds__(kThreads)
    ohwi_to_oihw_kernel(int in_channels, int kernel, const From* ohwi, float* oihw) {
  const int64_t slice = static_cast<int64_t>(in_channels) * kernel * kernel * blockIdx.x;
  transpose_weight_slice<false>(ohwi + slice, oihw + slice, in_channels, kernel);
}

}  // namespace

template <typename From, typename To>
void nchw_to_nhwc(int batch, int channels, int height, int width, const From* x, To* y,
                  cudaStream_t stream) {
  if (batch < 1 || channels < 1 || height < 1 || width < 1)
    fail("nchw_to_nhwc: every dimension must be >= 1, got ", batch, "x", channels, "x", height,
         "x", width);
  const int64_t count = static_cast<int64_t>(batch) * channels * height * width;
  nchw_to_nhwc_kernel<From, To><<<blocks_for(count), kThreads, 0, stream>>>(
      count, channels, layout::side_divisors(channels, height, width), x, y);
  RDDP_CUDA_CHECK_LAUNCH("nchw_to_nhwc_kernel");
}

template <typename To>
void pixels_to_input(int batch, int channels, int height, int width, const uint8_t* hwc,
                     const float* mean_stddev, To* y, MemoryFormat format, cudaStream_t stream) {
  if (batch < 1 || channels < 1 || height < 1 || width < 1)
    fail("pixels_to_input: every dimension must be >= 1, got ", batch, "x", height, "x", width,
         "x", channels);
  const int64_t count = static_cast<int64_t>(batch) * channels * height * width;
  const layout::SideDivisors sides = layout::side_divisors(channels, height, width);
  if (format == MemoryFormat::nhwc)
    pixels_to_input_kernel<true, To><<<blocks_for(count), kThreads, 0, stream>>>(
        count, channels, sides, hwc, mean_stddev, y);
  else
    pixels_to_input_kernel<false, To><<<blocks_for(count), kThreads, 0, stream>>>(
        count, channels, sides, hwc, mean_stddev, y);
  RDDP_CUDA_CHECK_LAUNCH("pixels_to_input_kernel");
}

template <typename To>
void weights_to_ohwi(const WeightPermutation* table, int convolutions, int max_out_channels,
                     const float* params, To* copy, cudaStream_t stream) {
  if (convolutions < 1) return;
  if (convolutions > 65535)
    fail("weights_to_ohwi: ", convolutions, " convolutions exceed one launch's grid");
  if (max_out_channels < 1)
    fail("weights_to_ohwi: max_out_channels must be >= 1, got ", max_out_channels);
  const dim3 grid(static_cast<unsigned>(max_out_channels), static_cast<unsigned>(convolutions));
  weights_to_ohwi_kernel<To><<<grid, kThreads, 0, stream>>>(table, params, copy);
  RDDP_CUDA_CHECK_LAUNCH("weights_to_ohwi_kernel");
}

template <typename From>
void ohwi_to_oihw(int out_channels, int in_channels, int kernel, const From* ohwi, float* oihw,
                  cudaStream_t stream) {
  if (out_channels < 1 || in_channels < 1 || kernel < 1)
    fail("ohwi_to_oihw: every dimension must be >= 1, got ", out_channels, "x", in_channels,
         "x", kernel, "x", kernel);
  ohwi_to_oihw_kernel<From><<<static_cast<unsigned>(out_channels), kThreads, 0, stream>>>(
      in_channels, kernel, ohwi, oihw);
  RDDP_CUDA_CHECK_LAUNCH("ohwi_to_oihw_kernel");
}

using bf16 = __nv_bfloat16;
template void nchw_to_nhwc<float, float>(int, int, int, int, const float*, float*, cudaStream_t);
template void nchw_to_nhwc<float, bf16>(int, int, int, int, const float*, bf16*, cudaStream_t);
template void weights_to_ohwi<float>(const WeightPermutation*, int, int, const float*, float*,
                                     cudaStream_t);
template void weights_to_ohwi<bf16>(const WeightPermutation*, int, int, const float*, bf16*,
                                    cudaStream_t);
template void ohwi_to_oihw<float>(int, int, int, const float*, float*, cudaStream_t);
template void ohwi_to_oihw<bf16>(int, int, int, const bf16*, float*, cudaStream_t);
#define RDDP_INSTANTIATE_PIXELS_TO_INPUT(T)                                                  \
  template void pixels_to_input<T>(int, int, int, int, const uint8_t*, const float*, T*,     \
                                   MemoryFormat, cudaStream_t);
RDDP_INSTANTIATE_PIXELS_TO_INPUT(float)
RDDP_INSTANTIATE_PIXELS_TO_INPUT(bf16)
RDDP_INSTANTIATE_PIXELS_TO_INPUT(__half)
#undef RDDP_INSTANTIATE_PIXELS_TO_INPUT
template void nchw_to_nhwc<float, __half>(int, int, int, int, const float*, __half*,
                                          cudaStream_t);
template void weights_to_ohwi<__half>(const WeightPermutation*, int, int, const float*, __half*,
                                      cudaStream_t);
template void ohwi_to_oihw<__half>(int, int, int, const __half*, float*, cudaStream_t);

}  // namespace rddp::cuda
