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
  ConvLayer(const ConvShape& geometry, bool needs_input_grad);

  ConvShape shape(int batch) const;

  // Descriptors and algorithms for `batch` images, chosen through `algorithms` (see
  // ConvAlgorithmCache::choose for `buffers` and `workspace_limit`). Returns the workspace the
  // layer's algorithms for this batch size need. Preparing a batch size again does nothing.
  size_t prepare(int batch, cudnnHandle_t handle, ConvAlgorithmCache& algorithms,
                 TensorDescriptorCache& descriptors, const ConvSearchBuffers* buffers,
                 size_t workspace_limit);
  bool prepared(int batch) const { return batches_.count(batch) != 0; }

  // y = conv(x, w). Device pointers; enqueued on the handle's stream.
  void forward(const CudnnCall& call, int batch, const ActivationType* x, const float* w,
               ActivationType* y) const;
  // dx = beta * dx + conv_transpose(dy, w): beta 0 overwrites, 1 accumulates (a residual
  // branch adding its share of the gradient).
  void backward_data(const CudnnCall& call, int batch, const ActivationType* dy, const float* w,
                     ActivationType* dx, float beta = 0.0f) const;
  // dw = gradient of the weight, overwritten.
  void backward_filter(const CudnnCall& call, int batch, const ActivationType* x,
                       const ActivationType* dy, float* dw) const;

 private:
  struct Prepared {
    const TensorDescriptor* x = nullptr;
    const TensorDescriptor* y = nullptr;
    const ConvAlgorithm* forward = nullptr;
    const ConvAlgorithm* backward_data = nullptr;  // null when the input gradient is not needed
    const ConvAlgorithm* backward_filter = nullptr;
  };
  const Prepared& at(int batch) const;

  ConvShape geometry_;
  bool needs_input_grad_;
  std::unique_ptr<FilterDescriptor> filter_;
  std::map<int, Prepared> batches_;
};

}  // namespace rddp::cuda
