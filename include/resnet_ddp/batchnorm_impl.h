#pragma once
// Which kernels compute the CUDA engine's BatchNorm layers (the CPU engine has one kind).
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
  return impl == BatchNormImpl::fused ? "fused" : "cudnn";
}

}  // namespace rddp
