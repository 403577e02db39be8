#pragma once
// The host side of --grad-allreduce bf16 (the CPU engine over MPI): each bucket's gradients
// are compressed into bfloat16 staging bits scaled by the rank's share, summed across ranks in
// bfloat16, and widened back into the float gradients. The element maths is kernels/
// kernel_math/bf16.h, which the CUDA kernels (include/resnet_ddp/cuda/bf16_cast.h) share.
#include <cstddef>
#include <cstdint>

namespace rddp::ddp {

// out[i] = bf16(bf16(gradients[i]) * share), as PyTorch's bf16_compress_hook.
void compress_bf16(const float* gradients, uint16_t* out, size_t count, float share);
// gradients[i] = float(in[i]), exact.
void decompress_bf16(const uint16_t* in, float* gradients, size_t count);
// inout[i] = bf16(float(in[i]) + float(inout[i])): one step of the allreduce's sum, as NCCL's
// bfloat16 sum; the body of the MPI reduction operation.
void accumulate_bf16(const uint16_t* in, uint16_t* inout, size_t count);

}  // namespace rddp::ddp
