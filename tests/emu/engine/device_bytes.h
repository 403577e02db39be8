#pragma once
// Device memory from the emulated cudaMalloc, owned, for the cuDNN stand-ins' tests: the
// stand-ins check that every pointer they are given lies in one device allocation.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

namespace fake_cudnn_testing {

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

}  // namespace fake_cudnn_testing
