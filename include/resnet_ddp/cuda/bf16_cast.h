#pragma once
// Host launchers of the casts of --grad-allreduce bf16 (kernels/bf16_cast.cu), on the maths of
// include/resnet_ddp/kernel_math/bf16.h that the host twins in include/resnet_ddp/ddp/bf16_gradients.h share.
// Each only enqueues one kernel on `stream` and checks the launch.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rddp::cuda {

// out[i] = bf16(bf16(gradients[i]) * share).
void compress_bf16(const float* gradients, uint16_t* out, size_t count, float share, cudaStream_t stream);
// gradients[i] = float(in[i]).
void decompress_bf16(const uint16_t* in, float* gradients, size_t count, cudaStream_t stream);

}  // namespace rddp::cuda
