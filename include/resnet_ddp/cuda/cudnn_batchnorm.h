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

  // `data_type` is what x, y and their gradients are stored in (float or bfloat16); gamma,
  // beta, the running and the saved statistics are float either way. `format` is the layout
  // of x, y and their gradients.
  BatchNormLayer(int channels, int height, int width,
                 cudnnDataType_t data_type = CUDNN_DATA_FLOAT,
                 cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);

  // The activation descriptor for `batch` images; preparing a batch size again does nothing.
  // The cache's data type and format must be the layer's.
  void prepare(int batch, TensorDescriptorCache& descriptors);
  bool prepared(int batch) const { return batches_.count(batch) != 0; }

  // Throws Error when training on `batch` images would leave a channel a single value, which
  // has no variance (PyTorch refuses it too).
  void check_trainable(int batch) const;

  // Training mode: normalise with the batch mean and biased variance; running_mean/var move by
  // kMomentum towards the batch mean and the unbiased variance; save_mean and save_invstd
  // (1 / sqrt(var + eps)) are kept for backward. Device pointers; y may not alias x.
  template <typename T>
  void forward_train(cudnnHandle_t handle, int batch, const T* x, const float* gamma,
                     const float* beta, float* running_mean, float* running_var, T* y,
                     float* save_mean, float* save_invstd) const {
    check_type(data_type_of<T>());
    forward_train_untyped(handle, batch, x, gamma, beta, running_mean, running_var, y, save_mean,
                          save_invstd);
  }
  // Evaluation mode: normalise with the running statistics.
  template <typename T>
  void forward_eval(cudnnHandle_t handle, int batch, const T* x, const float* gamma,
                    const float* beta, const float* running_mean, const float* running_var,
                    T* y) const {
    check_type(data_type_of<T>());
    forward_eval_untyped(handle, batch, x, gamma, beta, running_mean, running_var, y);
  }
  // Backward of training mode; dx, dgamma and dbeta are overwritten.
  template <typename T>
  void backward(cudnnHandle_t handle, int batch, const T* x, const T* dy, const float* gamma,
                const float* save_mean, const float* save_invstd, T* dx, float* dgamma,
                float* dbeta) const {
    check_type(data_type_of<T>());
    backward_untyped(handle, batch, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  }

 private:
  const TensorDescriptor& at(int batch) const;
  void check_type(cudnnDataType_t type) const;
  void forward_train_untyped(cudnnHandle_t handle, int batch, const void* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var, void* y,
                             float* save_mean, float* save_invstd) const;
  void forward_eval_untyped(cudnnHandle_t handle, int batch, const void* x, const float* gamma,
                            const float* beta, const float* running_mean,
                            const float* running_var, void* y) const;
  void backward_untyped(cudnnHandle_t handle, int batch, const void* x, const void* dy,
                        const float* gamma, const float* save_mean, const float* save_invstd,
                        void* dx, float* dgamma, float* dbeta) const;

  int channels_, height_, width_;
  cudnnDataType_t data_type_;
  cudnnTensorFormat_t format_;
  std::unique_ptr<TensorDescriptor> parameters_;  // 1 x C x 1 x 1, derived by cuDNN
  std::map<int, const TensorDescriptor*> batches_;
};

}  // namespace rddp::cuda
