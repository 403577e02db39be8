#include "resnet_ddp/cuda/cudnn_batchnorm.h"

#include <algorithm>

#include "resnet_ddp/cuda/check.h"
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
// per-channel tensors are 1xCx1x1, the same bytes in either format. The executor keeps
// CUDNN_BATCHNORM_SPATIAL in both formats. SPATIAL_PERSISTENT, which PyTorch uses for
// channels_last training, has faster NHWC kernels but numerics of its own: the GPU BatchNorm
// kernel test prints how far they are from the CPU twin and kernels_bench times them, so that a
// GPU run can decide. What is relied on here, that
// cuDNN accepts NHWC in this mode and computes what the CPU twin does, is checked by the NHWC
// executor tests in tests/gpu/test_cuda_nhwc.cpp.
//
// About the *Ex calls: in SPATIAL_PERSISTENT mode training goes through
// cudnnBatchNormalizationForwardTrainingEx and cudnnBatchNormalizationBackwardEx with
// CUDNN_BATCHNORM_OPS_BN, a workspace and a reserve space, as PyTorch's cuDNN BatchNorm has done
// since it took up those calls for channels_last. cuDNN's API reference lists among the
// conditions for its semi-persistent NHWC kernels a workspace of the size it asks for, which only
// the *Ex calls carry (and, in the versions of that reference we read, half-precision data, so
// bfloat16 and float may not reach those kernels: a GPU run of kernels_bench says). The
// arguments are PyTorch's: no z, no activation, no y in the backward, and the workspace sizes
// asked with the same descriptors. The layer keeps no memory itself: the caller
// passes BatchNormExBuffers, so that the executor can place them in its arena.
//
// About the fusions: CUDNN_BATCHNORM_OPS_BN_ACTIVATION computes relu(bn(x)), and
// CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION relu(bn(x) + z); the reserve space then carries what the
// backward needs of the ReLU, and the backward takes y and beta (the bias) beside x and dy, and
// under the add writes dz, the masked dy. cuDNN's API reference offers them with NHWC data in
// SPATIAL_PERSISTENT mode (and, in the versions we read, half precision and a channel count
// divisible by 4); where it does not, the call fails with cuDNN's status, which the error names.

BatchNormLayer::BatchNormLayer(int channels, int height, int width, cudnnDataType_t data_type,
                               cudnnTensorFormat_t format, cudnnBatchNormMode_t training_mode,
                               BatchNormFusion fusion)
    : channels_(channels),
      height_(height),
      width_(width),
      data_type_(data_type),
      format_(format),
      training_mode_(training_mode),
      fusion_(fusion) {
  if (channels < 1 || height < 1 || width < 1)
    fail("batchnorm: ", channels, " channels of ", height, "x", width,
         " is empty; every dimension must be >= 1");
  if (training_mode != CUDNN_BATCHNORM_SPATIAL && training_mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
    fail("internal error: batchnorm mode ", static_cast<int>(training_mode),
         " is neither SPATIAL nor SPATIAL_PERSISTENT; please report this");
  if (fusion != BatchNormFusion::none) {
    if (training_mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
      fail("internal error: cuDNN fuses into BatchNorm only in SPATIAL_PERSISTENT mode; please "
           "report this");
    relu_ = std::make_unique<ReluDescriptor>();
  }
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

BatchNormExBytes BatchNormLayer::ex_bytes(cudnnHandle_t handle, int batch) const {
  if (!uses_ex()) return {};
  const auto known = ex_bytes_.find(batch);
  if (known != ex_bytes_.end()) return known->second;
  const cudnnTensorDescriptor_t data = at(batch).get();
  const cudnnActivationDescriptor_t relu = relu_ ? relu_->get() : nullptr;
  const cudnnTensorDescriptor_t dz = fusion_ == BatchNormFusion::add_relu ? data : nullptr;
  size_t forward = 0, backward = 0, reserve = 0;
  try {
    RDDP_CUDNN_CHECK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        handle, training_mode_, ops(), data, data, data, parameters_->get(), relu, &forward));
    RDDP_CUDNN_CHECK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        handle, training_mode_, ops(), data, data, data, dz, data, parameters_->get(), relu,
        &backward));
    RDDP_CUDNN_CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
        handle, training_mode_, ops(), relu, data, &reserve));
  } catch (const Error& refused) {
    // Asked while the executor is built, before any step: a fusion cuDNN does not offer for
    // this data ends the run there, saying what to choose instead.
    if (fusion_ == BatchNormFusion::none) throw;
    fail("cuDNN refuses to fuse ",
         fusion_ == BatchNormFusion::add_relu ? "the residual add and the ReLU" : "the ReLU",
         " into BatchNorm on ", to_string(data_type_), " ",
         format_ == CUDNN_TENSOR_NHWC ? "NHWC" : "NCHW", " data of ", batch, "x", channels_,
         "x", height_, "x", width_, " (--batchnorm cudnn-fused; cuDNN documents that fusion for "
         "float16 NHWC data): use --precision fp16 --memory-format nhwc, or --batchnorm "
         "cudnn-persistent or fused. cuDNN said: ", refused.what());
  }
  const BatchNormExBytes bytes{std::max(forward, backward), reserve};
  ex_bytes_[batch] = bytes;
  return bytes;
}

cudnnBatchNormOps_t BatchNormLayer::ops() const {
  switch (fusion_) {
    case BatchNormFusion::relu: return CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    case BatchNormFusion::add_relu: return CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
    case BatchNormFusion::none: break;
  }
  return CUDNN_BATCHNORM_OPS_BN;
}

void BatchNormLayer::check_ex(cudnnHandle_t handle, int batch,
                              const BatchNormExBuffers& ex) const {
  const BatchNormExBytes needed = ex_bytes(handle, batch);
  if (ex.workspace_bytes < needed.workspace || ex.reserve_bytes < needed.reserve ||
      (needed.workspace > 0 && ex.workspace == nullptr) ||
      (needed.reserve > 0 && ex.reserve == nullptr))
    fail("internal error: cuDNN's BatchNorm of ", batch, "x", channels_, "x", height_, "x",
         width_, " needs a workspace of ", needed.workspace, " bytes and a reserve space of ",
         needed.reserve, " but was given ", ex.workspace_bytes, " and ", ex.reserve_bytes,
         "; please report this");
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
                                           float* save_mean, float* save_invstd,
                                           const BatchNormExBuffers& ex) const {
  RDDP_ASSERT(fusion_ == BatchNormFusion::none);
  check_trainable(batch);
  if (uses_ex()) {
    forward_train_ex(handle, batch, x, nullptr, gamma, beta, running_mean, running_var, y,
                     save_mean, save_invstd, ex);
    return;
  }
  const TensorDescriptor& data = at(batch);
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      handle, training_mode_, &one, &zero, data.get(), x, data.get(), y,
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
                                      float* dbeta, const BatchNormExBuffers& ex) const {
  RDDP_ASSERT(fusion_ == BatchNormFusion::none);
  if (uses_ex()) {
    // PyTorch's arguments: without an activation, neither y nor the bias.
    backward_ex(handle, batch, x, nullptr, dy, nullptr, gamma, nullptr, save_mean, save_invstd,
                dx, dgamma, dbeta, ex);
    return;
  }
  const TensorDescriptor& data = at(batch);
  const float one = 1.0f, zero = 0.0f;
  // Data and parameter gradients both overwrite (beta 0), as the CPU twin does; so do the *Ex
  // calls below.
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      handle, training_mode_, &one, &zero, &one, &zero, data.get(), x, data.get(), dy,
      data.get(), dx, parameters_->get(), gamma, dgamma, dbeta, kEpsilon, save_mean,
      save_invstd));
}

void BatchNormLayer::forward_train_fused_untyped(cudnnHandle_t handle, int batch, const void* x,
                                                 const void* z, const float* gamma,
                                                 const float* beta, float* running_mean,
                                                 float* running_var, void* y, float* save_mean,
                                                 float* save_invstd,
                                                 const BatchNormExBuffers& ex) const {
  RDDP_ASSERT(fusion_ != BatchNormFusion::none);
  RDDP_ASSERT((z != nullptr) == (fusion_ == BatchNormFusion::add_relu));
  check_trainable(batch);
  forward_train_ex(handle, batch, x, z, gamma, beta, running_mean, running_var, y, save_mean,
                   save_invstd, ex);
}

void BatchNormLayer::backward_fused_untyped(cudnnHandle_t handle, int batch, const void* x,
                                            const void* y, const void* dy, void* dz,
                                            const float* gamma, const float* beta,
                                            const float* save_mean, const float* save_invstd,
                                            void* dx, float* dgamma, float* dbeta,
                                            const BatchNormExBuffers& ex) const {
  RDDP_ASSERT(fusion_ != BatchNormFusion::none);
  RDDP_ASSERT((dz != nullptr) == (fusion_ == BatchNormFusion::add_relu));
  backward_ex(handle, batch, x, y, dy, dz, gamma, beta, save_mean, save_invstd, dx, dgamma,
              dbeta, ex);
}

// The *Ex calls for this layer's operations (ops()), fused or not: z, y, dz and the bias are
// null where the operations take none.
void BatchNormLayer::forward_train_ex(cudnnHandle_t handle, int batch, const void* x,
                                      const void* z, const float* gamma, const float* beta,
                                      float* running_mean, float* running_var, void* y,
                                      float* save_mean, float* save_invstd,
                                      const BatchNormExBuffers& ex) const {
  check_ex(handle, batch, ex);
  const cudnnTensorDescriptor_t data = at(batch).get();
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
      handle, training_mode_, ops(), &one, &zero, data, x, z != nullptr ? data : nullptr, z, data,
      y, parameters_->get(), gamma, beta, kMomentum, running_mean, running_var, kEpsilon,
      save_mean, save_invstd, relu_ ? relu_->get() : nullptr, ex.workspace, ex.workspace_bytes,
      ex.reserve, ex.reserve_bytes));
}

void BatchNormLayer::backward_ex(cudnnHandle_t handle, int batch, const void* x, const void* y,
                                 const void* dy, void* dz, const float* gamma, const float* beta,
                                 const float* save_mean, const float* save_invstd, void* dx,
                                 float* dgamma, float* dbeta, const BatchNormExBuffers& ex) const {
  check_ex(handle, batch, ex);
  const cudnnTensorDescriptor_t data = at(batch).get();
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
      handle, training_mode_, ops(), &one, &zero, &one, &zero, data, x,
      y != nullptr ? data : nullptr, y, data, dy, dz != nullptr ? data : nullptr, dz, data, dx,
      parameters_->get(), gamma, beta, dgamma, dbeta, kEpsilon, save_mean, save_invstd,
      relu_ ? relu_->get() : nullptr, ex.workspace, ex.workspace_bytes, ex.reserve,
      ex.reserve_bytes));
}

OwnedBatchNormExBuffers::OwnedBatchNormExBuffers(const BatchNormLayer& layer,
                                                 cudnnHandle_t handle, int batch) {
  const BatchNormExBytes bytes = layer.ex_bytes(handle, batch);
  workspace_ = DeviceBuffer<std::byte>(bytes.workspace);
  reserve_ = DeviceBuffer<std::byte>(bytes.reserve);
  view_ = {workspace_.get(), bytes.workspace, reserve_.get(), bytes.reserve};
}

}  // namespace rddp::cuda
