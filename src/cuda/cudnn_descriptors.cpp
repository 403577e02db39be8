#include "resnet_ddp/cuda/cudnn_descriptors.h"

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_check.h"

namespace rddp::cuda {

TensorDescriptor::TensorDescriptor() {
  RDDP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&descriptor_));
}
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(descriptor_); }

FilterDescriptor::FilterDescriptor() {
  RDDP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&descriptor_));
}
FilterDescriptor::~FilterDescriptor() { cudnnDestroyFilterDescriptor(descriptor_); }

ConvolutionDescriptor::ConvolutionDescriptor() {
  RDDP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&descriptor_));
}
ConvolutionDescriptor::~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(descriptor_); }

const char* to_string(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_FLOAT: return "float32";
    case CUDNN_DATA_BFLOAT16: return "bfloat16";
    case CUDNN_DATA_HALF: return "float16";
    default: return "another type";
  }
}

std::unique_ptr<TensorDescriptor> make_activation_descriptor(int batch, int channels, int height,
                                                             int width, cudnnDataType_t type,
                                                             cudnnTensorFormat_t format) {
  auto descriptor = std::make_unique<TensorDescriptor>();
  RDDP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor->get(), format, type, batch,
                                              channels, height, width));
  return descriptor;
}

std::unique_ptr<FilterDescriptor> make_filter_descriptor(int out_channels, int in_channels,
                                                         int kernel, cudnnDataType_t type,
                                                         cudnnTensorFormat_t format) {
  auto descriptor = std::make_unique<FilterDescriptor>();
  RDDP_CUDNN_CHECK(cudnnSetFilter4dDescriptor(descriptor->get(), type, format,
                                              out_channels, in_channels, kernel, kernel));
  return descriptor;
}

std::unique_ptr<ConvolutionDescriptor> make_convolution_descriptor(int stride, int pad,
                                                                   cudnnMathType_t math) {
  auto descriptor = std::make_unique<ConvolutionDescriptor>();
  RDDP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(descriptor->get(), pad, pad, stride, stride,
                                                   /*dilation_h=*/1, /*dilation_w=*/1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  RDDP_CUDNN_CHECK(cudnnSetConvolutionMathType(descriptor->get(), math));
  return descriptor;
}

const TensorDescriptor& TensorDescriptorCache::get(int batch, int channels, int height,
                                                   int width) {
  auto& slot = descriptors_[{batch, channels, height, width}];
  if (!slot) slot = make_activation_descriptor(batch, channels, height, width, type_, format_);
  return *slot;
}

}  // namespace rddp::cuda
