#pragma once
// cuDNN descriptors as owned objects, and the one place that decides how activations are laid
// out in memory and in which type they are stored.
//
// The legacy cuDNN API used here (descriptors, cudnnConvolution*, cudnnBatchNormalization*) is
// marked deprecated in cuDNN 9 in favour of the graph API, but is still shipped and supported.
// cuDNN only attaches the deprecation attribute when CUDNN_WARN_DEPRECATED is defined, which
// this project does not do, so the build stays free of warnings without suppressing any.
#include <cudnn.h>

#include <map>
#include <memory>
#include <tuple>

namespace rddp::cuda {

// The type activations are stored in. Mixed precision changes this and the instantiations of
// our kernels; parameters, gradients and optimizer state stay float either way.
using ActivationType = float;
constexpr cudnnDataType_t kActivationDataType = CUDNN_DATA_FLOAT;
// NCHW, PyTorch's default memory format, for activations and filters alike. Our own kernels
// (layer_kernels.h) index NCHW too; NHWC means changing this and them, nothing else.
constexpr cudnnTensorFormat_t kActivationFormat = CUDNN_TENSOR_NCHW;

class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return descriptor_; }

 private:
  cudnnTensorDescriptor_t descriptor_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return descriptor_; }

 private:
  cudnnFilterDescriptor_t descriptor_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return descriptor_; }

 private:
  cudnnConvolutionDescriptor_t descriptor_ = nullptr;
};

// An activation of `batch` images of channels x height x width.
std::unique_ptr<TensorDescriptor> make_activation_descriptor(int batch, int channels, int height,
                                                             int width);
// The weight of a convolution, [out_channels, in_channels, kernel, kernel] as PyTorch stores it.
std::unique_ptr<FilterDescriptor> make_filter_descriptor(int out_channels, int in_channels,
                                                         int kernel);
// A square, undilated cross-correlation (what PyTorch and cuDNN's CUDNN_CROSS_CORRELATION call
// convolution) computed in float, with the given math type.
std::unique_ptr<ConvolutionDescriptor> make_convolution_descriptor(int stride, int pad,
                                                                   cudnnMathType_t math);

// Activation descriptors by shape, created on first request and kept, so that layers sharing a
// shape share one descriptor and no descriptor is created while a step runs in steady state.
class TensorDescriptorCache {
 public:
  const TensorDescriptor& get(int batch, int channels, int height, int width);

 private:
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<TensorDescriptor>> descriptors_;
};

}  // namespace rddp::cuda
