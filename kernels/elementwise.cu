// ReLU, the residual addition, the bias broadcast and type conversions: elementwise,
// memory-bound, one grid-stride loop each. The expressions are those of src/cpu/elementwise.cpp,
// so float results match bit for bit. They compute in float whatever T is: for bfloat16 that is
// what PyTorch's bfloat16 kernels do (load, compute in float, round once on the store).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "grid_stride.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/layer_kernels.h"

namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU many times over; the grid-stride loop does the rest.
constexpr int64_t kMaxBlocks = 8192;

unsigned blocks_for(int64_t count) { return grid_stride_blocks(count, kThreads, kMaxBlocks); }

__device__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <typename T>
__global__ void relu_forward_kernel(int64_t count, const T* x, T* y) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float v = static_cast<float>(x[i]);
    y[i] = static_cast<T>(v < 0.0f ? 0.0f : v);
  }
}

template <typename T>
__global__ void relu_backward_kernel(int64_t count, const T* y, const T* dy, T* dx) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    dx[i] = static_cast<float>(y[i]) <= 0.0f ? static_cast<T>(0.0f) : dy[i];
}

template <typename T>
__global__ void add_kernel(int64_t count, const T* x, const T* y, T* z) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    z[i] = static_cast<T>(static_cast<float>(x[i]) + static_cast<float>(y[i]));
}

template <typename T>
__global__ void add_relu_kernel(int64_t count, const T* x, const T* y, T* z) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float sum = static_cast<float>(x[i]) + static_cast<float>(y[i]);
    z[i] = static_cast<T>(sum < 0.0f ? 0.0f : sum);
  }
}

template <typename T>
__global__ void broadcast_rows_kernel(int64_t count, int cols, const T* row, T* out) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) out[i] = row[i % cols];
}

template <typename From, typename To>
__global__ void convert_kernel(int64_t count, const From* from, To* to) {
  for (int64_t i = first_index(); i < count; i += grid_stride())
    to[i] = static_cast<To>(static_cast<float>(from[i]));
}

}  // namespace

template <typename From, typename To>
void convert(int64_t count, const From* from, To* to, cudaStream_t stream) {
  if (count <= 0) return;
  convert_kernel<From, To><<<blocks_for(count), kThreads, 0, stream>>>(count, from, to);
  RDDP_CUDA_CHECK_LAUNCH("convert_kernel");
}

template <typename T>
void relu_forward(int64_t count, const T* x, T* y, cudaStream_t stream) {
  if (count <= 0) return;
  relu_forward_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
  RDDP_CUDA_CHECK_LAUNCH("relu_forward_kernel");
}

template <typename T>
void relu_backward(int64_t count, const T* y, const T* dy, T* dx, cudaStream_t stream) {
  if (count <= 0) return;
  relu_backward_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(count, y, dy, dx);
  RDDP_CUDA_CHECK_LAUNCH("relu_backward_kernel");
}

template <typename T>
void add(int64_t count, const T* x, const T* y, T* z, cudaStream_t stream) {
  if (count <= 0) return;
  add_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(count, x, y, z);
  RDDP_CUDA_CHECK_LAUNCH("add_kernel");
}

template <typename T>
void add_relu(int64_t count, const T* x, const T* y, T* z, cudaStream_t stream) {
  if (count <= 0) return;
  add_relu_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(count, x, y, z);
  RDDP_CUDA_CHECK_LAUNCH("add_relu_kernel");
}

template <typename T>
void broadcast_rows(int rows, int cols, const T* row, T* out, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(rows) * cols;
  if (count <= 0) return;
  broadcast_rows_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(count, cols, row, out);
  RDDP_CUDA_CHECK_LAUNCH("broadcast_rows_kernel");
}

template void relu_forward<float>(int64_t, const float*, float*, cudaStream_t);
template void relu_backward<float>(int64_t, const float*, const float*, float*, cudaStream_t);
template void add<float>(int64_t, const float*, const float*, float*, cudaStream_t);
template void add_relu<float>(int64_t, const float*, const float*, float*, cudaStream_t);
template void broadcast_rows<float>(int, int, const float*, float*, cudaStream_t);

using bf16 = __nv_bfloat16;
template void relu_forward<bf16>(int64_t, const bf16*, bf16*, cudaStream_t);
template void relu_backward<bf16>(int64_t, const bf16*, const bf16*, bf16*, cudaStream_t);
template void add<bf16>(int64_t, const bf16*, const bf16*, bf16*, cudaStream_t);
template void add_relu<bf16>(int64_t, const bf16*, const bf16*, bf16*, cudaStream_t);
template void convert<float, bf16>(int64_t, const float*, bf16*, cudaStream_t);
template void convert<bf16, float>(int64_t, const bf16*, float*, cudaStream_t);

// float16 (half): float to half rounds to nearest even and overflows to Inf beyond 65504, as
// PyTorch's .half() does.
using fp16 = __half;
template void relu_forward<fp16>(int64_t, const fp16*, fp16*, cudaStream_t);
template void relu_backward<fp16>(int64_t, const fp16*, const fp16*, fp16*, cudaStream_t);
template void add<fp16>(int64_t, const fp16*, const fp16*, fp16*, cudaStream_t);
template void add_relu<fp16>(int64_t, const fp16*, const fp16*, fp16*, cudaStream_t);
template void convert<float, fp16>(int64_t, const float*, fp16*, cudaStream_t);
template void convert<fp16, float>(int64_t, const fp16*, float*, cudaStream_t);

}  // namespace rddp::cuda
