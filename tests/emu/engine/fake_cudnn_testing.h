#pragma once
// What the cuDNN stand-ins' tests (test_fake_cudnn.cpp, test_fake_cudnn_graph.cpp) share:
// device memory from the emulated cudaMalloc, owned (the stand-ins check that every pointer they
// are given lies in one device allocation), a cuDNN handle, the last error's text, and the
// convolution shapes, types, formats and directions both check.
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"

namespace fake_cudnn_testing {

using rddp::ConvShape;

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) REQUIRE(cudaMalloc(&data_, bytes) == cudaSuccess);
  }
  ~DeviceBytes() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void* get() const { return data_; }
  unsigned char* bytes_at(size_t offset) const {
    return static_cast<unsigned char*>(data_) + offset;
  }
  size_t bytes() const { return bytes_; }
  void fill(unsigned char value) {
    if (bytes_ > 0) REQUIRE(cudaMemset(data_, value, bytes_) == cudaSuccess);
  }
  void upload(const std::vector<unsigned char>& host) {
    REQUIRE(host.size() == bytes_);
    if (bytes_ > 0)
      REQUIRE(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    if (bytes_ > 0)
      REQUIRE(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct Handle {
  Handle() { REQUIRE(cudnnCreate(&handle) == CUDNN_STATUS_SUCCESS); }
  ~Handle() { cudnnDestroy(handle); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cudnnHandle_t handle = nullptr;
};

inline std::string last_error() {
  char text[512] = "";
  cudnnGetLastErrorString(text, sizeof text);
  return text;
}

inline const char* type_name(cudnnDataType_t type) {
  return type == CUDNN_DATA_FLOAT ? "float" : type == CUDNN_DATA_BFLOAT16 ? "bfloat16" : "half";
}
inline const char* format_name(cudnnTensorFormat_t format) {
  return format == CUDNN_TENSOR_NHWC ? "NHWC" : "NCHW";
}

inline const cudnnDataType_t kTypes[] = {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF};
inline const cudnnTensorFormat_t kFormats[] = {CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC};

inline const ConvShape kConvShapes[] = {
    ConvShape{2, 3, 7, 7, 4, 3, 1, 1},  // ResNet's 3x3 convolution
    ConvShape{2, 5, 8, 6, 6, 3, 2, 1},  // strided, on a non-square input
    ConvShape{3, 4, 5, 5, 8, 1, 2, 0},  // the 1x1 downsample
    ConvShape{2, 3, 9, 9, 4, 7, 2, 3},  // the ImageNet stem
    ConvShape{5, 2, 2, 2, 3, 3, 1, 1},  // deep-layer planes, several images a GEMM
};

// The three convolution directions, by name.
enum class Direction { forward, backward_data, backward_filter };
inline const Direction kDirections[] = {Direction::forward, Direction::backward_data,
                                 Direction::backward_filter};
inline const char* direction_name(Direction d) {
  return d == Direction::forward         ? "forward"
         : d == Direction::backward_data ? "backward data"
                                         : "backward filter";
}

}  // namespace fake_cudnn_testing
