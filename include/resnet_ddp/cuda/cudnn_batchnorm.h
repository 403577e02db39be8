#pragma once
// BatchNorm2d on cuDNN (CUDNN_BATCHNORM_SPATIAL, or its SPATIAL_PERSISTENT variant: one mean and
// variance per channel over batch, height and width), with torch.nn.BatchNorm2d's defaults.
#include <cudnn.h>

#include <map>
#include <memory>

#include "resnet_ddp/cuda/cudnn_descriptors.h"
#include "resnet_ddp/cuda/device_buffer.h"

namespace rddp::cuda {

// The device memory cuDNN's *Ex BatchNorm calls take beside the data: a workspace, scratch for
// the duration of one call, and a reserve space, which the training forward fills and the
// backward of the same batch reads, so it must keep its bytes in between.
struct BatchNormExBuffers {
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* reserve = nullptr;
  size_t reserve_bytes = 0;
};

// How many bytes of each a layer needs for a batch size (0 and 0 where it calls no *Ex).
struct BatchNormExBytes {
  size_t workspace = 0;  // the larger of the forward's and the backward's
  size_t reserve = 0;
};

// What a layer's training calls fold into BatchNorm through cuDNN's *Ex calls (SPATIAL_PERSISTENT
// mode only): nothing, the ReLU after it, or the residual add and then the ReLU.
enum class BatchNormFusion { none, relu, add_relu };

class BatchNormLayer {
 public:
  static constexpr double kMomentum = 0.1;  // cuDNN's exponentialAverageFactor
  static constexpr double kEpsilon = 1e-5;

  // `data_type` is what x, y and their gradients are stored in (float or bfloat16); gamma,
  // beta, the running and the saved statistics are float either way. `format` is the layout
  // of x, y and their gradients. `training_mode` is CUDNN_BATCHNORM_SPATIAL or
  // CUDNN_BATCHNORM_SPATIAL_PERSISTENT (the same maths; cuDNN's faster NHWC kernels, with
  // numerics of their own), for the training forward and the backward; evaluation is SPATIAL.
  // In SPATIAL_PERSISTENT mode training calls cuDNN's *Ex functions, as PyTorch does, and needs
  // the BatchNormExBuffers that ex_bytes() sizes; `fusion` other than none (that mode only)
  // makes training go through forward_train_fused and backward_fused instead.
  BatchNormLayer(int channels, int height, int width,
                 cudnnDataType_t data_type = CUDNN_DATA_FLOAT,
                 cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW,
                 cudnnBatchNormMode_t training_mode = CUDNN_BATCHNORM_SPATIAL,
                 BatchNormFusion fusion = BatchNormFusion::none);

  // The activation descriptor for `batch` images; preparing a batch size again does nothing.
  // The cache's data type and format must be the layer's.
  void prepare(int batch, TensorDescriptorCache& descriptors);
  bool prepared(int batch) const { return batches_.count(batch) != 0; }

  // The memory the training forward and backward of `batch` images (prepared) need beside the
  // data: none in SPATIAL mode.
  BatchNormExBytes ex_bytes(cudnnHandle_t handle, int batch) const;
  bool uses_ex() const { return training_mode_ == CUDNN_BATCHNORM_SPATIAL_PERSISTENT; }
  BatchNormFusion fusion() const { return fusion_; }

  // Throws Error when training on `batch` images would leave a channel a single value, which
  // has no variance (PyTorch refuses it too).
  void check_trainable(int batch) const;

  // Training mode: normalise with the batch mean and biased variance; running_mean/var move by
  // kMomentum towards the batch mean and the unbiased variance; save_mean and save_invstd
  // (1 / sqrt(var + eps)) are kept for backward. Device pointers; y may not alias x. `ex`
  // must hold at least what ex_bytes(batch) says, and its reserve must then be left alone until
  // the backward of this batch.
  template <typename T>
  void forward_train(cudnnHandle_t handle, int batch, const T* x, const float* gamma,
                     const float* beta, float* running_mean, float* running_var, T* y,
                     float* save_mean, float* save_invstd,
                     const BatchNormExBuffers& ex = {}) const {
    check_type(data_type_of<T>());
    forward_train_untyped(handle, batch, x, gamma, beta, running_mean, running_var, y, save_mean,
                          save_invstd, ex);
  }
  // The training forward with the fusion inside: y = relu(bn(x) + z) under add_relu, where z is
  // the residual, or relu(bn(x)) under relu, where z must be null. As forward_train otherwise.
  template <typename T>
  void forward_train_fused(cudnnHandle_t handle, int batch, const T* x, const T* z,
                           const float* gamma, const float* beta, float* running_mean,
                           float* running_var, T* y, float* save_mean, float* save_invstd,
                           const BatchNormExBuffers& ex) const {
    check_type(data_type_of<T>());
    forward_train_fused_untyped(handle, batch, x, z, gamma, beta, running_mean, running_var, y,
                                save_mean, save_invstd, ex);
  }
  // Its backward from dy, the gradient of y: cuDNN masks dy by the ReLU (from y and the reserve
  // space) and writes the masked dy to dz under add_relu, the residual's gradient (dz null under
  // relu). dx, dz, dgamma and dbeta are overwritten.
  template <typename T>
  void backward_fused(cudnnHandle_t handle, int batch, const T* x, const T* y, const T* dy,
                      T* dz, const float* gamma, const float* beta, const float* save_mean,
                      const float* save_invstd, T* dx, float* dgamma, float* dbeta,
                      const BatchNormExBuffers& ex) const {
    check_type(data_type_of<T>());
    backward_fused_untyped(handle, batch, x, y, dy, dz, gamma, beta, save_mean, save_invstd, dx,
                           dgamma, dbeta, ex);
  }
  // Evaluation mode: normalise with the running statistics.
  template <typename T>
  void forward_eval(cudnnHandle_t handle, int batch, const T* x, const float* gamma,
                    const float* beta, const float* running_mean, const float* running_var,
                    T* y) const {
    check_type(data_type_of<T>());
    forward_eval_untyped(handle, batch, x, gamma, beta, running_mean, running_var, y);
  }
  // Backward of training mode; dx, dgamma and dbeta are overwritten. `ex` is the forward's.
  template <typename T>
  void backward(cudnnHandle_t handle, int batch, const T* x, const T* dy, const float* gamma,
                const float* save_mean, const float* save_invstd, T* dx, float* dgamma,
                float* dbeta, const BatchNormExBuffers& ex = {}) const {
    check_type(data_type_of<T>());
    backward_untyped(handle, batch, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, ex);
  }

 private:
  const TensorDescriptor& at(int batch) const;
  void check_type(cudnnDataType_t type) const;
  void check_ex(cudnnHandle_t handle, int batch, const BatchNormExBuffers& ex) const;
  void forward_train_untyped(cudnnHandle_t handle, int batch, const void* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var, void* y,
                             float* save_mean, float* save_invstd,
                             const BatchNormExBuffers& ex) const;
  void forward_train_fused_untyped(cudnnHandle_t handle, int batch, const void* x, const void* z,
                                   const float* gamma, const float* beta, float* running_mean,
                                   float* running_var, void* y, float* save_mean,
                                   float* save_invstd, const BatchNormExBuffers& ex) const;
  void backward_fused_untyped(cudnnHandle_t handle, int batch, const void* x, const void* y,
                              const void* dy, void* dz, const float* gamma, const float* beta,
                              const float* save_mean, const float* save_invstd, void* dx,
                              float* dgamma, float* dbeta, const BatchNormExBuffers& ex) const;
  void forward_train_ex(cudnnHandle_t handle, int batch, const void* x, const void* z,
                        const float* gamma, const float* beta, float* running_mean,
                        float* running_var, void* y, float* save_mean, float* save_invstd,
                        const BatchNormExBuffers& ex) const;
  void backward_ex(cudnnHandle_t handle, int batch, const void* x, const void* y, const void* dy,
                   void* dz, const float* gamma, const float* beta, const float* save_mean,
                   const float* save_invstd, void* dx, float* dgamma, float* dbeta,
                   const BatchNormExBuffers& ex) const;
  cudnnBatchNormOps_t ops() const;
  void forward_eval_untyped(cudnnHandle_t handle, int batch, const void* x, const float* gamma,
                            const float* beta, const float* running_mean,
                            const float* running_var, void* y) const;
  void backward_untyped(cudnnHandle_t handle, int batch, const void* x, const void* dy,
                        const float* gamma, const float* save_mean, const float* save_invstd,
                        void* dx, float* dgamma, float* dbeta,
                        const BatchNormExBuffers& ex) const;

  int channels_, height_, width_;
  cudnnDataType_t data_type_;
  cudnnTensorFormat_t format_;
  cudnnBatchNormMode_t training_mode_;
  BatchNormFusion fusion_;
  std::unique_ptr<ReluDescriptor> relu_;  // with a fusion only
  std::unique_ptr<TensorDescriptor> parameters_;  // 1 x C x 1 x 1, derived by cuDNN
  std::map<int, const TensorDescriptor*> batches_;
  // ex_bytes() by batch size: asked of cuDNN once, as every step checks its buffers against it.
  mutable std::map<int, BatchNormExBytes> ex_bytes_;
};

// Device memory of its own for a layer's *Ex calls on `batch` images (prepared), for tests and
// benchmarks that drive one layer; the executor gives slices of its arena instead.
class OwnedBatchNormExBuffers {
 public:
  OwnedBatchNormExBuffers(const BatchNormLayer& layer, cudnnHandle_t handle, int batch);
  const BatchNormExBuffers& get() const { return view_; }

 private:
  DeviceBuffer<std::byte> workspace_, reserve_;
  BatchNormExBuffers view_;
};

}  // namespace rddp::cuda
