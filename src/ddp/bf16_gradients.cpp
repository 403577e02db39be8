// Host loops over include/resnet_ddp/kernel_math/bf16.h for the bfloat16 gradient allreduce.
#include "resnet_ddp/ddp/bf16_gradients.h"

#include "resnet_ddp/kernel_math/bf16.h"

namespace rddp::ddp {

void compress_bf16(const float* gradients, uint16_t* out, size_t count, float share) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16::compress(gradients[i], share);
}

void decompress_bf16(const uint16_t* in, float* gradients, size_t count) {
  for (size_t i = 0; i < count; ++i) gradients[i] = bf16::to_float(in[i]);
}

void accumulate_bf16(const uint16_t* in, uint16_t* inout, size_t count) {
  for (size_t i = 0; i < count; ++i) inout[i] = bf16::add(in[i], inout[i]);
}

}  // namespace rddp::ddp
