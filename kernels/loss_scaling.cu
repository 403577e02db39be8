// The device side of dynamic loss scaling (see include/resnet_ddp/cuda/loss_scaling.h): small
// kernels, none of which the host waits for.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "grid_stride.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/loss_scaling.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 2048;

unsigned blocks_for(size_t count) {
  return grid_stride_blocks(static_cast<int64_t>(count), kThreads, kMaxBlocks);
}

__global__ void scale_kernel(float* values, int64_t count, const loss_scale::StepState* state) {
  const float scale = state->scaler.scale;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    values[i] *= scale;
}

// found_inf was zeroed before the launch; a block that saw a non-finite value sets it. Blocks
// race only to write the same 1.
__global__ void __launch_bounds__(kThreads)
    find_non_finite_kernel(const float* __restrict__ grads, size_t count,
                           loss_scale::StepState* state) {
  bool found = false;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    found |= !hd::is_finite(grads[i]);
  if (__syncthreads_or(found) && threadIdx.x == 0) state->found_inf = 1;
}

__global__ void begin_step_kernel(loss_scale::StepState* state, loss_scale::Config config,
                                  const adamw::Hyperparameters* hyperparameters,
                                  adamw::Scalars<float>* scalars) {
  const bool take = loss_scale::begin_step(*state, config);
  if (take && hyperparameters != nullptr)
    *scalars = adamw::scalars<float>(*hyperparameters, state->step_count);
}

}  // namespace

void scale_loss_gradient(float* values, int64_t count, const loss_scale::StepState* state,
                         cudaStream_t stream) {
  if (count <= 0) return;
  scale_kernel<<<blocks_for(static_cast<size_t>(count)), kThreads, 0, stream>>>(values, count,
                                                                                state);
  RDDP_CUDA_CHECK_LAUNCH("scale_kernel");
}

void find_non_finite(const float* grads, size_t count, loss_scale::StepState* state,
                     cudaStream_t stream) {
  // The field's device address, computed without touching device memory.
  void* found_inf = reinterpret_cast<char*>(state) + offsetof(loss_scale::StepState, found_inf);
  RDDP_CUDA_CHECK(cudaMemsetAsync(found_inf, 0, sizeof(int32_t), stream));
  if (count == 0) return;
  find_non_finite_kernel<<<blocks_for(count), kThreads, 0, stream>>>(grads, count, state);
  RDDP_CUDA_CHECK_LAUNCH("find_non_finite_kernel");
}

void begin_scaled_step(loss_scale::StepState* state, const loss_scale::Config& config,
                       const adamw::Hyperparameters* hyperparameters,
                       adamw::Scalars<float>* scalars, cudaStream_t stream) {
  RDDP_ASSERT((hyperparameters == nullptr) == (scalars == nullptr));
  begin_step_kernel<<<1, 1, 0, stream>>>(state, config, hyperparameters, scalars);
  RDDP_CUDA_CHECK_LAUNCH("begin_step_kernel");
}

}  // namespace rddp::cuda
