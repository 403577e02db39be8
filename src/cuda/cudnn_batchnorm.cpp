#include "resnet_ddp/cuda/cudnn_batchnorm.h"

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_check.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

// About the running variance: cuDNN updates resultRunningVariance with the *unbiased* batch
// variance (sum of squares / (n - 1)), as PyTorch specifies for BatchNorm, and normalises with
// the biased one; PyTorch's own cuDNN path relies on it, passing running_var straight to
// cudnnBatchNormalizationForwardTraining. The GPU layer test checks both against the CPU twin
// on a channel of few values, where n / (n - 1) is far from 1.
//
// About the saved statistics: what cuDNN calls resultSaveInvVariance is 1 / sqrt(var + eps),
// the inverse standard deviation, which is what its backward expects back.
//
// About bfloat16: the legacy cudnnBatchNormalization* functions take x, y, dy and dx in the
// activations' type and every per-channel tensor (scale, bias, running and saved statistics,
// scale and bias gradients) in the type cudnnDeriveBNTensorDescriptor derives, which cudnn_ops.h
// documents as "(typeOf(x) == double) ? double : float": float for bfloat16 activations, the
// layout of autocast's BatchNorm (16-bit activations, float parameters and statistics). cuDNN
// computes the statistics in float. bfloat16 activations need compute capability 8.0 or later
// (TensorFlow's cuDNN FusedBatchNorm enables bfloat16 on the same condition); on an older GPU the
// call fails with CUDNN_STATUS_NOT_SUPPORTED, which RDDP_CUDNN_CHECK reports.
//
// About NHWC: the legacy functions take x, y, dy and dx through ordinary tensor descriptors,
// whose strides say where each (n, c, h, w) lives; cudnn_ops.h restricts their type (above) but
// not their layout, and describes the data only by its logical dimensions "NxCxHxW". So an NHWC
// descriptor (cudnnSetTensor4dDescriptor with CUDNN_TENSOR_NHWC) is all this layer changes;
// PyTorch's cuDNN BatchNorm likewise passes channels_last tensors' strides straight through. The
// per-channel tensors are 1xCx1x1, the same bytes in either format. What is relied on here, that
// cuDNN accepts NHWC in this mode and computes what the CPU twin does, is checked by the NHWC
// executor tests in tests/gpu/test_cuda_nhwc.cpp. (cuDNN's SPATIAL_PERSISTENT mode, which
// PyTorch trains channels_last with, measured slower than our fused kernels on an H100:
// bench/results/2026-11-27-H100-ef6fe5e.)

BatchNormLayer::BatchNormLayer(int channels, int height, int width, cudnnDataType_t data_type,
                               cudnnTensorFormat_t format)
    : channels_(channels), height_(height), width_(width), data_type_(data_type), format_(format) {
  if (channels < 1 || height < 1 || width < 1)
    fail("batchnorm: ", channels, " channels of ", height, "x", width,
         " is empty; every dimension must be >= 1");
  const auto one_image =
      make_activation_descriptor(1, channels, height, width, data_type, format);
  parameters_ = std::make_unique<TensorDescriptor>();
  RDDP_CUDNN_CHECK(
      cudnnDeriveBNTensorDescriptor(parameters_->get(), one_image->get(), CUDNN_BATCHNORM_SPATIAL));
}

void BatchNormLayer::prepare(int batch, TensorDescriptorCache& descriptors) {
  RDDP_ASSERT(descriptors.type() == data_type_ && descriptors.format() == format_);
  if (!prepared(batch)) batches_[batch] = &descriptors.get(batch, channels_, height_, width_);
}

void BatchNormLayer::check_trainable(int batch) const {
  if (static_cast<long long>(batch) * height_ * width_ == 1)
    fail("batchnorm: batch * height * width is 1 at this layer (input ", batch, "x", channels_,
         "x", height_, "x", width_, "), so a channel has a single value and no variance ",
         "(PyTorch: \"Expected more than 1 value per channel when training\"); use a batch of ",
         "at least 2 or a larger input image");
}

const TensorDescriptor& BatchNormLayer::at(int batch) const {
  const auto found = batches_.find(batch);
  RDDP_ASSERT(found != batches_.end());
  return *found->second;
}

void BatchNormLayer::check_type(cudnnDataType_t type) const {
  if (type != data_type_)
    fail("internal error: a batchnorm of ", to_string(data_type_), " data was given ",
         to_string(type), " buffers; please report this");
}

void BatchNormLayer::forward_train_untyped(cudnnHandle_t handle, int batch, const void* x,
                                           const float* gamma, const float* beta,
                                           float* running_mean, float* running_var, void* y,
                                           float* save_mean, float* save_invstd) const {
  check_trainable(batch);
  const TensorDescriptor& data = at(batch);
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, data.get(), x, data.get(), y,
      parameters_->get(), gamma, beta, kMomentum, running_mean, running_var, kEpsilon, save_mean,
      save_invstd));
}

void BatchNormLayer::forward_eval_untyped(cudnnHandle_t handle, int batch, const void* x,
                                          const float* gamma, const float* beta,
                                          const float* running_mean, const float* running_var,
                                          void* y) const {
  const TensorDescriptor& data = at(batch);
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, data.get(), x, data.get(), y,
      parameters_->get(), gamma, beta, running_mean, running_var, kEpsilon));
}

void BatchNormLayer::backward_untyped(cudnnHandle_t handle, int batch, const void* x,
                                      const void* dy, const float* gamma, const float* save_mean,
                                      const float* save_invstd, void* dx, float* dgamma,
                                      float* dbeta) const {
  const TensorDescriptor& data = at(batch);
  const float one = 1.0f, zero = 0.0f;
  // Data and parameter gradients both overwrite (beta 0), as the CPU twin does.
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, data.get(), x, data.get(), dy,
      data.get(), dx, parameters_->get(), gamma, dgamma, dbeta, kEpsilon, save_mean,
      save_invstd));
}

}  // namespace rddp::cuda
