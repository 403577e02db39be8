#pragma once
// Which kernels compute the CUDA engine's BatchNorm layers (the CPU engine has one kind).
#include <string>

namespace rddp {

enum class BatchNormImpl {
  // cuDNN's cudnnBatchNormalization* calls, with ReLU and the residual add as passes of their
  // own: what PyTorch's cuDNN BatchNorm does.
  cudnn,
  // Our kernels (kernels/batchnorm.cu): the same maths with ReLU, and in a block's second
  // BatchNorm the residual add, folded into the pass that writes the output, and the ReLU's
  // mask into the backward's passes; their NHWC reductions read along channels.
  fused,
};

inline const char* to_string(BatchNormImpl impl) {
  switch (impl) {
    case BatchNormImpl::fused: return "fused";
    case BatchNormImpl::cudnn: break;
  }
  return "cudnn";
}

// The implementation named `text` (as to_string names it); throws Error naming `flag` and the
// names it accepts otherwise.
BatchNormImpl parse_batchnorm_impl(const std::string& flag, const std::string& text);

}  // namespace rddp
