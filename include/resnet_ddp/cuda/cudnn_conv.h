#pragma once
// A convolution layer on cuDNN: forward, backward data and backward filter of PyTorch's
// nn.Conv2d (no bias, no dilation, one group), for any batch size it has been prepared for.
#include <cudnn.h>

#include <map>
#include <memory>

#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/cuda/cudnn_descriptors.h"

namespace rddp::cuda {

// What every cuDNN call of a step shares: the handle (bound to the compute stream) and the one
// workspace, which must be at least as large as the prepared algorithms need.
struct CudnnCall {
  cudnnHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

class ConvLayer {
 public:
  // `geometry` gives everything but the batch size (its `batch` is ignored). A layer whose input
  // gradient is never needed (the first of the network) chooses no backward-data algorithm.
  // `data_type` is what x, w, y and their gradients are stored in (float or bfloat16; cuDNN
  // wants one type for all of them); the calls below take pointers of the matching type.
  // `format` is their layout (cudnn_descriptors.h): under NHWC, w and dw are OHWI.
  ConvLayer(const ConvShape& geometry, bool needs_input_grad,
            cudnnDataType_t data_type = CUDNN_DATA_FLOAT,
            cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);

  ConvShape shape(int batch) const;
  cudnnDataType_t data_type() const { return data_type_; }

  // Descriptors and algorithms for `batch` images, chosen through `algorithms` (see
  // ConvAlgorithmCache::choose for `buffers` and `workspace_limit`). Returns the workspace the
  // layer's algorithms for this batch size need. Preparing a batch size again does nothing.
  // The caches' data type and format must be the layer's.
  size_t prepare(int batch, cudnnHandle_t handle, ConvAlgorithmCache& algorithms,
                 TensorDescriptorCache& descriptors, const ConvSearchBuffers* buffers,
                 size_t workspace_limit);
  bool prepared(int batch) const { return batches_.count(batch) != 0; }
  // The workspace a timed search of this layer's directions at `batch` needs (see
  // ConvAlgorithmCache::search_workspace_bytes): size the search's workspace with it.
  size_t search_workspace_bytes(int batch, cudnnHandle_t handle,
                                const ConvAlgorithmCache& algorithms,
                                size_t workspace_limit) const;

  // y = conv(x, w). Device pointers; enqueued on the handle's stream.
  template <typename T>
  void forward(const CudnnCall& call, int batch, const T* x, const T* w, T* y) const {
    check_type(data_type_of<T>());
    forward_untyped(call, batch, x, w, y);
  }
  // dx = beta * dx + conv_transpose(dy, w): beta 0 overwrites, 1 accumulates (a residual
  // branch adding its share of the gradient). Under the graph API (MathPolicy::api) beta must be
  // 0 or 1, the two it prepares plans for.
  template <typename T>
  void backward_data(const CudnnCall& call, int batch, const T* dy, const T* w, T* dx,
                     float beta = 0.0f) const {
    check_type(data_type_of<T>());
    backward_data_untyped(call, batch, dy, w, dx, beta);
  }
  // dw = gradient of the weight, overwritten. Its type is the filter's, so under bfloat16 the
  // caller widens it into the float gradient itself.
  template <typename T>
  void backward_filter(const CudnnCall& call, int batch, const T* x, const T* dy, T* dw) const {
    check_type(data_type_of<T>());
    backward_filter_untyped(call, batch, x, dy, dw);
  }

 private:
  struct Prepared {
    const TensorDescriptor* x = nullptr;
    const TensorDescriptor* y = nullptr;
    const ConvAlgorithm* forward = nullptr;
    const ConvAlgorithm* backward_data = nullptr;  // null when the input gradient is not needed
    const ConvAlgorithm* backward_data_accumulate = nullptr;  // beta 1; likewise
    const ConvAlgorithm* backward_filter = nullptr;
  };
  const Prepared& at(int batch) const;
  void check_type(cudnnDataType_t type) const;
  void forward_untyped(const CudnnCall& call, int batch, const void* x, const void* w,
                       void* y) const;
  void backward_data_untyped(const CudnnCall& call, int batch, const void* dy, const void* w,
                             void* dx, float beta) const;
  void backward_filter_untyped(const CudnnCall& call, int batch, const void* x, const void* dy,
                               void* dw) const;

  ConvShape geometry_;
  bool needs_input_grad_;
  cudnnDataType_t data_type_;
  cudnnTensorFormat_t format_;
  std::unique_ptr<FilterDescriptor> filter_;
  std::map<int, Prepared> batches_;
};

}  // namespace rddp::cuda
