// Global average pooling: one warp per (n, c) plane sums in double, like the CPU twin in
// src/cpu/pooling.cpp, so both round the same exact-to-double sum to the same float (their
// orders differ, which double precision makes immaterial for planes of any realistic size).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "grid_stride.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"

// Values pass through float on the way in and out (exact for float; for bfloat16 the double
// result is rounded to float, then to bfloat16, which cuda_bf16.h converts from float only).
namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kPlanesPerBlock = kThreads / kWarp;
constexpr int64_t kMaxBlocks = 8192;
constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__global__ void global_avgpool_forward_kernel(int64_t planes, int spatial, const T* x, T* y) {
  const int lane = threadIdx.x % kWarp;
  // Whole warps share a plane, so every lane of a warp leaves the loop together and the
  // shuffles always see all 32 lanes.
  for (int64_t plane = static_cast<int64_t>(blockIdx.x) * kPlanesPerBlock + threadIdx.x / kWarp;
       plane < planes; plane += static_cast<int64_t>(gridDim.x) * kPlanesPerBlock) {
    const T* x_p = x + plane * spatial;
    double sum = 0.0;
    for (int i = lane; i < spatial; i += kWarp)
      sum += static_cast<double>(static_cast<float>(x_p[i]));
    for (int mask = kWarp / 2; mask > 0; mask /= 2) sum += __shfl_xor_sync(kFullMask, sum, mask);
    if (lane == 0) y[plane] = static_cast<T>(static_cast<float>(sum / spatial));
  }
}

template <typename T>
__global__ void global_avgpool_backward_kernel(int64_t count, int spatial, const T* dy, T* dx) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    dx[i] = static_cast<T>(
        static_cast<float>(static_cast<double>(static_cast<float>(dy[i / spatial])) / spatial));
}

// NHWC: the C values of one pixel are adjacent, so one thread per (n, c) sums its plane in
// pixel order while a warp's loads cover 32 adjacent channels (coalesced). In double, like the
// NCHW kernel: the sum is exact to double, so the different order rounds to the same float.
template <typename T>
__global__ void global_avgpool_forward_nhwc_kernel(int64_t planes, int channels, int spatial,
                                                   const T* x, T* y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t plane = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       plane < planes; plane += stride) {
    const int64_t n = plane / channels, c = plane % channels;
    const T* x_p = x + n * spatial * channels + c;
    double sum = 0.0;
    for (int i = 0; i < spatial; ++i)
      sum += static_cast<double>(static_cast<float>(x_p[static_cast<int64_t>(i) * channels]));
    y[plane] = static_cast<T>(static_cast<float>(sum / spatial));
  }
}

template <typename T>
__global__ void global_avgpool_backward_nhwc_kernel(int64_t count, int channels, int spatial,
                                                    const T* dy, T* dx) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    // i = (n * spatial + pixel) * channels + c; dy is [N, C].
    const int64_t c = i % channels, n = i / (static_cast<int64_t>(spatial) * channels);
    dx[i] = static_cast<T>(static_cast<float>(
        static_cast<double>(static_cast<float>(dy[n * channels + c])) / spatial));
  }
}

void check_global(int batch, int channels, int spatial) {
  if (batch < 1 || channels < 1 || spatial < 1)
    fail("global_avgpool: batch ", batch, ", channels ", channels, " and spatial size ", spatial,
         " must all be >= 1");
}

unsigned blocks_for(int64_t work, int64_t per_block) {
  return grid_stride_blocks(work, per_block, kMaxBlocks);
}

}  // namespace

template <typename T>
void global_avgpool_forward(int batch, int channels, int spatial, const T* x, T* y,
                            cudaStream_t stream, MemoryFormat format) {
  check_global(batch, channels, spatial);
  const int64_t planes = static_cast<int64_t>(batch) * channels;
  if (format == MemoryFormat::nhwc) {
    global_avgpool_forward_nhwc_kernel<T><<<blocks_for(planes, kThreads), kThreads, 0, stream>>>(
        planes, channels, spatial, x, y);
    RDDP_CUDA_CHECK_LAUNCH("global_avgpool_forward_nhwc_kernel");
    return;
  }
  global_avgpool_forward_kernel<T>
      <<<blocks_for(planes, kPlanesPerBlock), kThreads, 0, stream>>>(planes, spatial, x, y);
  RDDP_CUDA_CHECK_LAUNCH("global_avgpool_forward_kernel");
}

template <typename T>
void global_avgpool_backward(int batch, int channels, int spatial, const T* dy, T* dx,
                             cudaStream_t stream, MemoryFormat format) {
  check_global(batch, channels, spatial);
  const int64_t count = static_cast<int64_t>(batch) * channels * spatial;
  if (format == MemoryFormat::nhwc) {
    global_avgpool_backward_nhwc_kernel<T><<<blocks_for(count, kThreads), kThreads, 0, stream>>>(
        count, channels, spatial, dy, dx);
    RDDP_CUDA_CHECK_LAUNCH("global_avgpool_backward_nhwc_kernel");
    return;
  }
  global_avgpool_backward_kernel<T>
      <<<blocks_for(count, kThreads), kThreads, 0, stream>>>(count, spatial, dy, dx);
  RDDP_CUDA_CHECK_LAUNCH("global_avgpool_backward_kernel");
}

template void global_avgpool_forward<float>(int, int, int, const float*, float*, cudaStream_t,
                                            MemoryFormat);
template void global_avgpool_backward<float>(int, int, int, const float*, float*, cudaStream_t,
                                             MemoryFormat);
template void global_avgpool_forward<__nv_bfloat16>(int, int, int, const __nv_bfloat16*,
                                                    __nv_bfloat16*, cudaStream_t, MemoryFormat);
template void global_avgpool_backward<__nv_bfloat16>(int, int, int, const __nv_bfloat16*,
                                                     __nv_bfloat16*, cudaStream_t, MemoryFormat);
template void global_avgpool_forward<__half>(int, int, int, const __half*, __half*, cudaStream_t,
                                             MemoryFormat);
template void global_avgpool_backward<__half>(int, int, int, const __half*, __half*, cudaStream_t,
                                              MemoryFormat);

}  // namespace rddp::cuda
