// The casts of --grad-allreduce bf16: a bucket's float gradients into its bfloat16 staging
// slice (rounded, scaled by the rank's share, rounded again, as PyTorch's bf16_compress_hook)
// and the allreduced bits back into the gradients. Memory-bound grid-stride loops over
// include/resnet_ddp/kernel_math/bf16.h, the formulas of the host twins in src/ddp/bf16_gradients.cpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "grid_stride.h"
#include "resnet_ddp/kernel_math/bf16.h"
#include "resnet_ddp/cuda/bf16_cast.h"
#include "resnet_ddp/cuda/check.h"

namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;  // many waves on any current GPU; the loop does the rest

unsigned blocks_for(int64_t count) { return grid_stride_blocks(count, kThreads, kMaxBlocks); }

__global__ void compress_bf16_kernel(int64_t count, const float* gradients, uint16_t* out,
                                     float share) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = bf16::compress(gradients[i], share);
}

__global__ void decompress_bf16_kernel(int64_t count, const uint16_t* in, float* gradients) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    gradients[i] = bf16::to_float(in[i]);
}

}  // namespace

void compress_bf16(const float* gradients, uint16_t* out, size_t count, float share,
                   cudaStream_t stream) {
  if (count == 0) return;
  const auto n = static_cast<int64_t>(count);
  compress_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, gradients, out, share);
  RDDP_CUDA_CHECK_LAUNCH("compress_bf16_kernel");
}

void decompress_bf16(const uint16_t* in, float* gradients, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  const auto n = static_cast<int64_t>(count);
  decompress_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, in, gradients);
  RDDP_CUDA_CHECK_LAUNCH("decompress_bf16_kernel");
}

}  // namespace rddp::cuda
