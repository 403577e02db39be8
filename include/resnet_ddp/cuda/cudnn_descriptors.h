#pragma once
// cuDNN descriptors as owned objects, and the one place that decides how activations are laid
// out in memory and in which type they are stored.
//
// The legacy cuDNN API used here (descriptors, cudnnConvolution*, cudnnBatchNormalization*) is
// marked deprecated in cuDNN 9 in favour of the graph API, but is still shipped and supported.
// cuDNN only attaches the deprecation attribute when CUDNN_WARN_DEPRECATED is defined, which
// this project does not do, so the build stays free of warnings without suppressing any.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <tuple>

namespace rddp::cuda {

// The types activations may be stored in: float, or bfloat16 or float16 under mixed precision
// (the executor is instantiated for each). Parameters, gradients and optimizer state stay float
// either way; under a 16-bit type the convolutions and the fc read a 16-bit copy of their
// weights.
template <typename T>
constexpr cudnnDataType_t data_type_of();
template <>
constexpr cudnnDataType_t data_type_of<float>() {
  return CUDNN_DATA_FLOAT;
}
template <>
constexpr cudnnDataType_t data_type_of<__nv_bfloat16>() {
  return CUDNN_DATA_BFLOAT16;
}
template <>
constexpr cudnnDataType_t data_type_of<__half>() {
  return CUDNN_DATA_HALF;
}
const char* to_string(cudnnDataType_t type);
// The memory format of activations and convolution filters alike: CUDNN_TENSOR_NCHW
// (PyTorch's default; filters OIHW, as the flat parameter buffers hold them) or
// CUDNN_TENSOR_NHWC (torch.channels_last; filters OHWI, which cuDNN calls KRSC, so the
// executor convolves with a permuted copy of the weights). The descriptors' dimensions stay
// the logical N, C, H, W (K, C, R, S) either way; only the strides differ.

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

// An activation of `batch` images of channels x height x width, stored as `type`.
std::unique_ptr<TensorDescriptor> make_activation_descriptor(
    int batch, int channels, int height, int width, cudnnDataType_t type = CUDNN_DATA_FLOAT,
    cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
// The weight of a convolution, [out_channels, in_channels, kernel, kernel] as PyTorch stores it
// under NCHW, [out_channels, kernel, kernel, in_channels] under NHWC. cuDNN requires the
// filter's type and format to be the activations' (x, y, dx, dy and dw alike).
std::unique_ptr<FilterDescriptor> make_filter_descriptor(
    int out_channels, int in_channels, int kernel, cudnnDataType_t type = CUDNN_DATA_FLOAT,
    cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
// A square, undilated cross-correlation (what PyTorch and cuDNN's CUDNN_CROSS_CORRELATION call
// convolution) computed in float, with the given math type. The compute type is float for float
// and for bfloat16 data alike: cuDNN's legacy convolution API lists FLOAT_CONFIG (x, w, y FLOAT,
// compute FLOAT) and PSEUDO_BFLOAT16_CONFIG (x, w, y BFLOAT16, compute FLOAT, compute capability
// 8.0 and later); there is no bfloat16 accumulation, which is what autocast asks for anyway.
// float16 data likewise uses PSEUDO_HALF_CONFIG (x, w, y HALF, compute FLOAT), as PyTorch's
// half convolutions do, rather than TRUE_HALF_CONFIG's half accumulation.
std::unique_ptr<ConvolutionDescriptor> make_convolution_descriptor(int stride, int pad,
                                                                   cudnnMathType_t math);

// Activation descriptors by shape, created on first request and kept, so that layers sharing a
// shape share one descriptor and no descriptor is created while a step runs in steady state.
class TensorDescriptorCache {
 public:
  explicit TensorDescriptorCache(cudnnDataType_t type = CUDNN_DATA_FLOAT,
                                 cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW)
      : type_(type), format_(format) {}
  const TensorDescriptor& get(int batch, int channels, int height, int width);
  cudnnDataType_t type() const { return type_; }
  cudnnTensorFormat_t format() const { return format_; }

 private:
  cudnnDataType_t type_;
  cudnnTensorFormat_t format_;
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<TensorDescriptor>> descriptors_;
};

}  // namespace rddp::cuda
