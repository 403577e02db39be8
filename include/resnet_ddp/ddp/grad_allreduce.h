#pragma once
// The type gradients travel as in the reducer's allreduce (--grad-allreduce): float32, or
// bfloat16 as PyTorch DDP's bf16_compress_hook sends them (half the bytes, about 3 significant
// decimal digits per rank's share).
#include <string>

namespace rddp::ddp {

enum class GradAllreduce { fp32, bf16 };

const char* to_string(GradAllreduce kind);
// "fp32" or "bf16"; throws Error naming `flag` and the choices otherwise.
GradAllreduce parse_grad_allreduce(const std::string& flag, const std::string& text);

}  // namespace rddp::ddp
