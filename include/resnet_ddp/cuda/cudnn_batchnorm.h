#pragma once
// BatchNorm2d on cuDNN (CUDNN_BATCHNORM_SPATIAL: one mean and variance per channel over batch,
// height and width), with torch.nn.BatchNorm2d's defaults.
#include <cudnn.h>

#include <map>
#include <memory>

#include "resnet_ddp/cuda/cudnn_descriptors.h"

namespace rddp::cuda {

class BatchNormLayer {
 public:
  static constexpr double kMomentum = 0.1;  // cuDNN's exponentialAverageFactor
  static constexpr double kEpsilon = 1e-5;

  BatchNormLayer(int channels, int height, int width);

  // The activation descriptor for `batch` images; preparing a batch size again does nothing.
  void prepare(int batch, TensorDescriptorCache& descriptors);
  bool prepared(int batch) const { return batches_.count(batch) != 0; }

  // Throws Error when training on `batch` images would leave a channel a single value, which
  // has no variance (PyTorch refuses it too).
  void check_trainable(int batch) const;

  // Training mode: normalise with the batch mean and biased variance; running_mean/var move by
  // kMomentum towards the batch mean and the unbiased variance; save_mean and save_invstd
  // (1 / sqrt(var + eps)) are kept for backward. Device pointers; y may not alias x.
  void forward_train(cudnnHandle_t handle, int batch, const ActivationType* x, const float* gamma,
                     const float* beta, float* running_mean, float* running_var,
                     ActivationType* y, float* save_mean, float* save_invstd) const;
  // Evaluation mode: normalise with the running statistics.
  void forward_eval(cudnnHandle_t handle, int batch, const ActivationType* x, const float* gamma,
                    const float* beta, const float* running_mean, const float* running_var,
                    ActivationType* y) const;
  // Backward of training mode; dx, dgamma and dbeta are overwritten.
  void backward(cudnnHandle_t handle, int batch, const ActivationType* x,
                const ActivationType* dy, const float* gamma, const float* save_mean,
                const float* save_invstd, ActivationType* dx, float* dgamma, float* dbeta) const;

 private:
  const TensorDescriptor& at(int batch) const;

  int channels_, height_, width_;
  std::unique_ptr<TensorDescriptor> parameters_;  // 1 x C x 1 x 1, derived by cuDNN
  std::map<int, const TensorDescriptor*> batches_;
};

}  // namespace rddp::cuda
