#pragma once
// Device arrays and a stream for the kernel tests that compare a kernel with its CPU twin, shared
// by the GPU tests (tests/gpu) and the emulated ones (tests/emu), where the same runtime calls
// go to the emulator's host memory.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "resnet_ddp/cuda/check.h"

namespace rddp::testing {

// `count` elements on the device, with room for `offset` more in front, so that a test can
// hand a kernel a pointer that is deliberately not 16-byte aligned.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count, size_t offset = 0) : count_(count), offset_(offset) {
    RDDP_CUDA_CHECK(cudaMalloc(&base_, (count + offset) * sizeof(T)));
  }
  ~DeviceArray() { cudaFree(base_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return base_ + offset_; }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == count_);
    RDDP_CUDA_CHECK(cudaMemcpy(get(), host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    RDDP_CUDA_CHECK(cudaMemcpy(host.data(), get(), count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // All bits set: a NaN in every float, -1 in every integer.
  void poison() { RDDP_CUDA_CHECK(cudaMemset(get(), 0xff, count_ * sizeof(T))); }

 private:
  T* base_ = nullptr;
  size_t count_, offset_;
};

// A blocking stream (not cudaStreamNonBlocking): the plain cudaMemcpy and cudaMemset calls of
// DeviceArray run on the legacy default stream, which a blocking stream waits for, so every
// upload and poisoning is done before the kernel that follows reads the buffer.
class Stream {
 public:
  Stream() { RDDP_CUDA_CHECK(cudaStreamCreate(&stream_)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return stream_; }
  void sync() const { RDDP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace rddp::testing
