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
  // cudnn, with training's forward and backward in CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode
  // through cuDNN's *Ex calls, as PyTorch trains channels_last models: the same maths in
  // cuDNN's kernels for that mode, whose reduction cuDNN documents as deterministic but able to
  // overflow to Inf or NaN on inputs of extreme range, where SPATIAL's does not.
  cudnn_persistent,
  // cudnn_persistent with the ReLU, and in a block's second BatchNorm the residual add, inside
  // cuDNN's *Ex calls (CUDNN_BATCHNORM_OPS_BN_ACTIVATION and BN_ADD_ACTIVATION): cuDNN's own
  // fusion, which its documentation offers for NHWC (and, in the versions we read, half
  // precision); elsewhere cuDNN refuses the call and the run stops with its error.
  cudnn_fused,
};

inline const char* to_string(BatchNormImpl impl) {
  switch (impl) {
    case BatchNormImpl::fused: return "fused";
    case BatchNormImpl::cudnn_persistent: return "cudnn-persistent";
    case BatchNormImpl::cudnn_fused: return "cudnn-fused";
    case BatchNormImpl::cudnn: break;
  }
  return "cudnn";
}

// The implementation named `text` (as to_string names it); throws Error naming `flag` and the
// names it accepts otherwise.
BatchNormImpl parse_batchnorm_impl(const std::string& flag, const std::string& text);

}  // namespace rddp
